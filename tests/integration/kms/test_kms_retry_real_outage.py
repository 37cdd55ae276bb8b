"""RetryingKms against a real outage: the KMS port refuses connections, then comes back."""

from __future__ import annotations

from typing import Any

import pytest
from kms_providers import new_alias

from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.errors import KmsUnavailable
from strongroom.kms.metered import MeteredKms
from strongroom.kms.retrying import RetryingKms
from strongroom.kms.vault import VaultKms
from strongroom.testing.forwarder import TcpForwarder

pytestmark = pytest.mark.integration


def _through(forwarder: TcpForwarder, openbao: Any) -> VaultKms:
    return VaultKms.from_config(
        {"address": f"http://127.0.0.1:{forwarder.port}", "token": openbao.token, "timeout_seconds": 2}
    )


def test_retries_until_the_kms_comes_back(openbao: Any) -> None:
    kek = VaultKekAdmin(openbao.client()).create_kek(new_alias())
    forwarder = TcpForwarder(int(openbao.address.rsplit(":", 1)[1]))
    metered = MeteredKms(_through(forwarder, openbao))
    kms = RetryingKms(metered, max_attempts=30, base_delay_seconds=0.05, max_delay_seconds=0.2, deadline_seconds=20)
    try:
        forwarder.start_after(0.8)
        pair = kms.generate_dek(kek)
        assert kms.unwrap(pair.edek) == pair.dek
    finally:
        forwarder.stop()
        kms.close()
    outcomes = metered.snapshot()["operations"]["generate_dek"]["outcomes"]
    assert outcomes["ok"] == 1
    assert outcomes["KmsUnavailable"] >= 2  # it really was down for a while


def test_gives_up_with_the_attempt_count(openbao: Any) -> None:
    forwarder = TcpForwarder(int(openbao.address.rsplit(":", 1)[1]))  # never started
    kms = RetryingKms(_through(forwarder, openbao), max_attempts=4, base_delay_seconds=0.01, deadline_seconds=10)
    with pytest.raises(KmsUnavailable, match=r"after 4 attempt\(s\)") as info:
        kms.resolve_alias("anything")
    assert "retry later" in str(info.value)
