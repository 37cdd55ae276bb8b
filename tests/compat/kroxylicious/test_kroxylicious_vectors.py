"""Records written by the real Kroxylicious proxy (its in-memory test KMS, fixed KEK) decrypt here.

The vectors come from Kroxylicious's own deserialization compatibility test (see
/work/shared/reference/kroxylicious-vectors.json; a copy is kept beside this test so the suite does
not depend on the reference directory).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from strongroom.recovery.checker import AvailabilityChecker
from strongroom.recovery.dependency import KeyStatus, RecordKind
from strongroom.recovery.formats import KroxyliciousFormat, KroxyliciousInMemoryKms
from strongroom.recovery.formats.kroxylicious import decrypt_record

VECTORS = json.loads((Path(__file__).parent / "kroxylicious-vectors.json").read_text())
FMT = KroxyliciousFormat("inmemory")


def _record(case: dict[str, Any]) -> tuple[list[tuple[str, bytes | None]], bytes | None]:
    headers = [(name, base64.b64decode(value)) for name, value in case["headers"]]
    value = None if case["value"] is None else base64.b64decode(case["value"])
    return headers, value


def _kms() -> KroxyliciousInMemoryKms:
    return KroxyliciousInMemoryKms.from_json({VECTORS["kek_uuid"]: VECTORS["kek_aes256_base64"]})


@pytest.mark.parametrize("case", VECTORS["records"], ids=[c["name"] for c in VECTORS["records"]])
def test_vector_decrypts_to_the_expected_record(case: dict[str, Any]) -> None:
    headers, value = _record(case)
    decrypted = decrypt_record(headers, value, FMT, _kms())
    expected = case["expected"]
    assert decrypted.value == (None if expected["value"] is None else expected["value"].encode())
    assert decrypted.headers == [(k, v.encode()) for k, v in expected["headers"]]


def test_vectors_depend_on_the_fixed_kek() -> None:
    encrypted = [_record(c) for c in VECTORS["records"] if c["value"] is not None]
    keks = {FMT.dependency(FMT.record_keys(h, v).prefixes[0]).kek for h, v in encrypted}
    assert keks == {f"inmemory:{VECTORS['kek_uuid']}"}


def test_availability_check_with_and_without_the_kek() -> None:
    headers, value = _record(VECTORS["records"][0])
    assert AvailabilityChecker(FMT, _kms()).check_record(headers, value).readable
    lost = AvailabilityChecker(FMT, KroxyliciousInMemoryKms({}))
    verdict = lost.check_record(headers, value)
    assert verdict.lost
    assert verdict.verdicts[0].status is KeyStatus.LOST
    null = VECTORS["records"][1]
    assert lost.check_record(*_record(null)).kind is RecordKind.TOMBSTONE
