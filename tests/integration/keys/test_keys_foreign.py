"""The key service answers a key only to a record of the key's own subject (issue 11, item 10).

A record that names subject A but points at the key of subject B (moved, or forged by someone who can
write to the topic) must not fetch B's key into the task that opens it: the driver classifies such a
pair as ``foreign`` and hands out nothing.
"""

from __future__ import annotations

from strongroom.kafka.config import ClientConfig
from strongroom.keys.manager import KeyManager
from strongroom.keys.table import KeyTable
from strongroom.kms.metered import MeteredKms
from strongroom.spark.dataframes import classify_key
from strongroom.spark.transforms import KEY_AVAILABLE, KEY_FOREIGN


def test_a_key_is_classified_for_its_own_subject_only(client: ClientConfig, kms: MeteredKms, keys_topic: str) -> None:
    with KeyManager(client, kms, topic=keys_topic) as manager:
        keys = manager.get_or_create(["alice", "bob"])
    alice, bob = keys["alice"], keys["bob"]
    with KeyTable(client, kms, topic=keys_topic, register=False) as table:
        table.wait_caught_up(30)
        assert classify_key(table, alice.key_id, "alice") == (alice.key_id, alice.key, KEY_AVAILABLE, None)
        key_id, dek, state, reason = classify_key(table, bob.key_id, "alice")
        assert (key_id, dek, state) == (bob.key_id, None, KEY_FOREIGN)
        assert reason is not None
        assert "belongs to another subject" in reason
        # a key id without a claimed subject (none could be extracted) is not judged here
        assert classify_key(table, bob.key_id, None)[2] == KEY_AVAILABLE
