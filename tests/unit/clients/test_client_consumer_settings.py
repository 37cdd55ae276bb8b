"""The decrypting consumer refuses a policy it does not know before it connects, and says what to pass."""

from __future__ import annotations

import pytest

from strongroom.clients import DecryptingConsumer
from strongroom.errors import ConfigError
from strongroom.kafka.config import ClientConfig
from strongroom.keys.table import KeyTable
from strongroom.rules import EncryptionRules, TopicRule

# Nothing listens here: each case must fail on its settings, before any connection is made.
CLIENT = ClientConfig("127.0.0.1:9")
RULES = EncryptionRules(rules=(TopicRule(topic="orders"),))


@pytest.mark.parametrize(
    ("setting", "value", "problem", "hint"),
    [
        ("on_failure", "ignore", "on_failure='ignore' is not one of fail, dead-letter, skip", "pass on_failure='fail'"),
        ("erased", "keep", "erased='keep' is not one of drop, mark", "pass erased='drop'"),
        ("pending", "later", "pending='later' is not one of wait, fail", "pass pending='wait'"),
        (
            "on_failure",
            "dead-letter",
            "on_failure='dead-letter' needs a dead-letter topic",
            "pass dead_letter_topic=...",
        ),
    ],
)
def test_an_unknown_policy_is_refused_with_the_choice_to_pass(
    setting: str, value: str, problem: str, hint: str
) -> None:
    table = KeyTable(CLIENT, None)  # settings only: nothing is opened
    with pytest.raises(ConfigError) as caught:
        DecryptingConsumer(CLIENT, RULES, table, group_id="g", **{setting: value})  # type: ignore[arg-type]
    assert caught.value.problem == problem
    assert caught.value.hint == hint
