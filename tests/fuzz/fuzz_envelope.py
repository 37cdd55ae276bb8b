"""Coverage-guided fuzzing of the envelope parser, the decryptors and JSON field mode with atheris (libFuzzer).

Not part of the pytest suite (the seeded mutation fuzz in tests/unit/envelope runs there). atheris
is not a project dependency; install it aside and run, for example::

    .venv/bin/pip install --target /tmp/atheris-pkg atheris
    PYTHONPATH=/tmp/atheris-pkg .venv/bin/python tests/fuzz/fuzz_envelope.py -runs=1000000 tests/fuzz/corpus

The first byte picks the target; the rest is the input. A crash is:

* any exception other than a strongroom ``EnvelopeError`` (``UnicodeEncodeError``, ``RecursionError``,
  ``KeyError``... would stop a pipeline instead of routing the record by policy);
* a successful decryption of bytes that are not one of the seed envelopes (a forgery);
* field-mode encryption that returns a document in which a rule field is not sealed, or in which an
  ``sr1:`` string stands outside the rule's fields;
* field-mode decryption, with the rules, that returns a document still holding an ``sr1:`` string at a
  rule field, or a record codec outcome other than the ones :mod:`strongroom.clients.sealing` defines.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from strongroom.clients.sealing import Erased, Failed, KmsDown, Opened, Passthrough, Pending, RuleCodec
    from strongroom.envelope import (
        FIELD_PREFIX,
        RecordContext,
        SubjectKeyRef,
        WrappedDekRef,
        decrypt_json_fields,
        decrypt_value,
        encrypt_json_fields,
        parse,
        seal,
    )
    from strongroom.envelope.header import marker_header
    from strongroom.envelope.ids import ValueMode
    from strongroom.errors import EnvelopeError
    from strongroom.rules import TopicRule

DEK = bytes(range(32))
KEY_ID = bytes(range(16))
CTX = RecordContext("orders", b"customer-1")
RULES = ["$.email", "$.n[*].x"]
REFS = [SubjectKeyRef(KEY_ID), WrappedDekRef("vault:orders-kek", b"vault:v1:" + bytes(40))]
SEEDS = {seal(b'{"a":1}', DEK, ref, CTX) for ref in REFS}
DOC_SEEDS = {encrypt_json_fields(b'{"email":"a@b","n":[{"x":1}]}', RULES, DEK, ref, CTX) for ref in REFS}
FIELD_RULE = TopicRule.model_validate({"topic": "orders", "mode": "fields", "fields": RULES})
CODECS = [RuleCodec(FIELD_RULE), RuleCodec(FIELD_RULE, encrypted_only=True)]
OUTCOMES = (Opened, Passthrough, Erased, Pending, KmsDown, Failed)
SEALED_EMAIL = json.loads(min(DOC_SEEDS))["email"]
#: Hostile documents the corpus starts from (issue 11): each must be refused or handled, never crash.
HOSTILE = [
    b'{"note":"\\ud800","email":"x"}',
    b'{"email":"\\udc00"}',
    b'{"\\ud800":1}',
    b'{"email":"alice@example.com","email":"' + SEALED_EMAIL.encode() + b'"}',
    b'{"email":"\\u0073' + SEALED_EMAIL[1:].encode() + b'"}',
    b'{"email":"a","other":"' + SEALED_EMAIL.encode() + b'"}',
    b'{"email":"sr1:not base64"}',
    b'{"n":1e400,"email":"x"}',
    b'{"email":NaN}',
    b"\xef\xbb\xbf" + b'{"email":"x"}',
    b'{"email":' + b"[" * 5000 + b"]" * 5000 + b"}",
]


def lookup(ref: object) -> bytes:
    return DEK


def subject_lookup(ref: SubjectKeyRef, subject: str) -> bytes:
    return DEK


def _decrypt(body: bytes, with_rules: bool) -> None:
    opened = decrypt_json_fields(body, lookup, CTX, expect_encrypted=RULES if with_rules else None)
    document = json.loads(opened)
    if with_rules and isinstance(document, dict) and str(document.get("email", "")).startswith(FIELD_PREFIX):
        raise AssertionError("a rule field is still sealed after decryption")


def _encrypt(body: bytes) -> None:
    sealed = json.loads(encrypt_json_fields(body, RULES, DEK, SubjectKeyRef(KEY_ID), CTX))
    email = sealed.get("email") if isinstance(sealed, dict) else None
    if email is not None and not str(email).startswith(FIELD_PREFIX):
        raise AssertionError("a rule field is not sealed after encryption")
    others = [v for k, v in sealed.items() if k not in ("email", "n")]
    if any(_sealed_strings(v) for v in others):
        raise AssertionError("an sr1: string outside the rule's fields survived encryption")


def _sealed_strings(root: object) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str) and node.startswith(FIELD_PREFIX):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _open_record(body: bytes, strict: bool, marked: bool) -> None:
    headers = [marker_header(ValueMode.JSON_FIELDS)] if marked else []
    outcome = CODECS[strict].open(b"customer-1", body, headers, "orders", subject_lookup)
    if not isinstance(outcome, OUTCOMES):
        raise AssertionError(f"unexpected outcome {outcome!r}")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0] % 8, data[1:]
    try:
        if mode == 0:
            parse(body)
        elif mode == 1:
            plaintext = decrypt_value(body, lookup, CTX)
            if body not in SEEDS:
                raise AssertionError(f"forged envelope decrypted to {len(plaintext)} bytes")
        elif mode in (2, 3):
            _decrypt(body, with_rules=mode == 3)
        elif mode == 4:
            _encrypt(body)
        else:
            _open_record(body, strict=mode == 5, marked=mode == 6)
    except EnvelopeError:
        pass


def write_corpus(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(sorted(SEEDS)):
        (directory / f"envelope-{i}").write_bytes(b"\x01" + seed)
    for i, doc in enumerate(sorted(DOC_SEEDS)):
        for mode in (2, 3, 6, 7):
            (directory / f"document-{i}-{mode}").write_bytes(bytes([mode]) + doc)
    (directory / "field-b64").write_bytes(
        b"\x02" + json.dumps({"a": "sr1:" + base64.b64encode(min(SEEDS)).decode()}).encode()
    )
    for i, doc in enumerate(HOSTILE):
        for mode in range(2, 8):
            (directory / f"hostile-{i}-{mode}").write_bytes(bytes([mode]) + doc)


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    corpus = [Path(arg) for arg in sys.argv[1:] if not arg.startswith("-")]
    for directory in corpus:
        write_corpus(directory)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
