"""Subject extraction: record key, JSON path, header; the missing-subject policies."""

from __future__ import annotations

import pytest

from strongroom.keys.errors import KeysConfigError, SubjectMissing
from strongroom.keys.subjects import MissingSubjectPolicy, SubjectExtractor, SubjectExtractors, SubjectMissingInfo


def test_from_the_record_key() -> None:
    assert SubjectExtractor("key").extract("t", 0, 1, b"alice", b"{}") == "alice"


def test_from_a_json_path() -> None:
    extractor = SubjectExtractor("json", path="$.customer.id")
    assert extractor.extract("t", 0, 1, None, b'{"customer": {"id": "c-1"}}') == "c-1"
    assert extractor.extract("t", 0, 1, None, b'{"customer": {"id": 42}}') == "42"


def test_from_a_header_first_one_wins_as_in_the_pipelines() -> None:
    extractor = SubjectExtractor("header", header="subject")
    assert extractor.extract("t", 0, 1, None, None, [("subject", b"a"), ("x", b"y"), ("subject", b"b")]) == "a"
    assert extractor.extract("t", 0, 1, None, None, {"subject": b"c"}) == "c"


@pytest.mark.parametrize(
    ("extractor", "key", "value", "reason"),
    [
        (SubjectExtractor("key"), None, b"{}", "record key is null"),
        (SubjectExtractor("key"), b"", b"{}", "record key is empty"),
        (SubjectExtractor("key"), b"\xff", b"{}", "not UTF-8"),
        (SubjectExtractor("json", path="$.id"), None, b"not json", "not UTF-8 JSON"),
        # two members of one name: readers disagree on which one counts, so neither is the subject
        (SubjectExtractor("json", path="$.id"), None, b'{"id": "alice", "id": "bob"}', "names a member twice"),
        (SubjectExtractor("json", path="$.id"), None, b'{"id": "\\ud800"}', "not UTF-8 JSON"),
        (SubjectExtractor("json", path="$.id"), None, b'{"other": 1}', "has no $.id"),
        (SubjectExtractor("json", path="$.id"), None, b'{"id": true}', "bool"),
        (SubjectExtractor("json", path="$.id"), None, b'{"id": null}', "null"),
        (SubjectExtractor("header", header="s"), None, None, "header 's' is null"),
    ],
)
def test_error_policy_names_the_record(
    extractor: SubjectExtractor, key: bytes | None, value: bytes, reason: str
) -> None:
    with pytest.raises(SubjectMissing, match=r"orders/3@17 has no subject") as info:
        extractor.extract("orders", 3, 17, key, value)
    assert reason in str(info.value)


@pytest.mark.parametrize("policy", [MissingSubjectPolicy.SKIP, MissingSubjectPolicy.DEAD_LETTER])
def test_skip_and_dead_letter_return_what_happened(policy: MissingSubjectPolicy) -> None:
    result = SubjectExtractor("key", missing=policy).extract("orders", 1, 2, None, b"{}")
    assert isinstance(result, SubjectMissingInfo)
    assert result.policy is policy
    assert result.describe() == "record orders/1@2 has no subject: the record key is null"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"from": "json"}, "needs a path"),
        ({"from": "json", "path": "$.items[*].id"}, r"\[\*\]"),
        ({"from": "json", "path": "id"}, "must start with"),
        ({"from": "header"}, "needs a header"),
        ({"from": "cookie"}, "source is one of"),
        ({"from": "key", "missing": "ignore"}, "missing is one of"),
        ({"from": "key", "typo": 1}, "unknown option"),
    ],
)
def test_bad_configuration(config: dict[str, object], message: str) -> None:
    with pytest.raises(KeysConfigError, match=message):
        SubjectExtractor.from_config(config)


def test_per_topic_configuration_with_a_default() -> None:
    extractors = SubjectExtractors.from_config(
        {"orders": {"from": "json", "path": "$.customer"}, "*": {"from": "key", "missing": "skip"}}
    )
    assert extractors.for_topic("orders").describe() == "json $.customer"
    assert extractors.for_topic("anything").missing is MissingSubjectPolicy.SKIP
    with pytest.raises(KeysConfigError, match="no subject extraction"):
        SubjectExtractors.from_config({}).for_topic("orders")
