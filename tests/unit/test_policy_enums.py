"""One StrEnum per policy: the plain words in, members out, and an unknown word named with its choices."""

from __future__ import annotations

import pytest

from strongroom.errors import ConfigError, PipelineError
from strongroom.policies import FrameOnFailure, FrameOnReject, OnFailure, OnReject, choose
from strongroom.rules import EncryptionRules, TopicRule


def test_choose_gives_the_member_for_its_plain_word() -> None:
    chosen = choose("on_failure", "dead-letter", OnFailure, ConfigError)
    assert chosen is OnFailure.DEAD_LETTER
    assert choose("on_reject", FrameOnReject.DROP, FrameOnReject, PipelineError) is FrameOnReject.DROP


@pytest.mark.parametrize(
    ("policy", "error", "value", "message"),
    [
        (FrameOnReject, PipelineError, "dead-letter", "on_reject='dead-letter' is not one of fail, drop"),
        (FrameOnFailure, PipelineError, "dead-letter", "on_failure='dead-letter' is not one of fail, keep, skip"),
        (OnReject, ConfigError, "drop", "on_reject='drop' is not one of fail, dead-letter"),
    ],
)
def test_an_unknown_word_is_refused_naming_the_choices(
    policy: type[OnReject], error: type[Exception], value: str, message: str
) -> None:
    name = message.partition("=")[0]
    with pytest.raises(error, match=message) as caught:
        choose(name, value, policy, error)
    assert caught.value.hint == f"pass {name}={next(iter(policy)).value!r}"  # type: ignore[attr-defined]


def test_a_rule_reads_its_on_reject_policy_as_the_policy_enum() -> None:
    rule = TopicRule(topic="orders", on_reject="dead-letter")  # type: ignore[arg-type]
    assert rule.on_reject is OnReject.DEAD_LETTER
    assert TopicRule(topic="orders").on_reject is OnReject.FAIL
    with pytest.raises(ConfigError, match="on_reject"):
        EncryptionRules.parse_obj_or_fail({"rules": [{"topic": "orders", "on_reject": "drop"}]})
