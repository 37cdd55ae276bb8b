"""Coverage-guided fuzzing of the envelope parser and decryptors with atheris (libFuzzer).

Not part of the pytest suite (the seeded mutation fuzz in tests/unit/envelope runs there). atheris
is not a project dependency; install it aside and run, for example::

    .venv/bin/pip install --target /tmp/atheris-pkg atheris
    PYTHONPATH=/tmp/atheris-pkg .venv/bin/python tests/fuzz/fuzz_envelope.py -runs=500000 tests/fuzz/corpus

Any exception other than an EnvelopeError subclass, and any successful decryption of bytes that are
not one of the seed envelopes, is a crash.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from strongroom.envelope import (
        RecordContext,
        SubjectKeyRef,
        WrappedDekRef,
        decrypt_json_fields,
        decrypt_value,
        encrypt_json_fields,
        parse,
        seal,
    )
    from strongroom.errors import EnvelopeError

DEK = bytes(range(32))
CTX = RecordContext("orders", b"customer-1")
REFS = [SubjectKeyRef(bytes(range(16))), WrappedDekRef("vault:orders-kek", b"vault:v1:" + bytes(40))]
SEEDS = {seal(b'{"a":1}', DEK, ref, CTX) for ref in REFS}
DOC_SEEDS = {
    encrypt_json_fields(b'{"email":"a@b","n":[{"x":1}]}', ["$.email", "$.n[*].x"], DEK, ref, CTX) for ref in REFS
}


def lookup(ref: object) -> bytes:
    return DEK


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0] % 3, data[1:]
    try:
        if mode == 0:
            parse(body)
        elif mode == 1:
            plaintext = decrypt_value(body, lookup, CTX)
            if body not in SEEDS:
                raise AssertionError(f"forged envelope decrypted to {len(plaintext)} bytes")
        else:
            opened = decrypt_json_fields(body, lookup, CTX)
            json.loads(opened)
    except EnvelopeError:
        pass


def write_corpus(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(sorted(SEEDS)):
        (directory / f"envelope-{i}").write_bytes(b"\x01" + seed)
    for i, doc in enumerate(sorted(DOC_SEEDS)):
        (directory / f"document-{i}").write_bytes(b"\x02" + doc)
    (directory / "field-b64").write_bytes(
        b"\x02" + json.dumps({"a": "sr1:" + base64.b64encode(min(SEEDS)).decode()}).encode()
    )


if __name__ == "__main__":
    corpus = [Path(arg) for arg in sys.argv[1:] if not arg.startswith("-")]
    for directory in corpus:
        write_corpus(directory)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
