"""A key creator in its own process (for the concurrency test): get_or_create at a given instant, then seal.

Usage: python key_creator_process.py BOOTSTRAP KEYS_TOPIC READERS_TOPIC KEYRING SUBJECTS_FILE OUT_FILE START_AT
Writes ``{"keys": {subject: [key_id hex, envelope base64]}, "created": n, "discarded": n}`` to OUT_FILE.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

from strongroom.envelope import RecordContext, seal
from strongroom.kafka.config import ClientConfig
from strongroom.keys import KeyManager, SubjectKey
from strongroom.kms.local import LocalKms


def main() -> None:
    bootstrap, keys_topic, readers_topic, keyring, subjects_file, out_file, start_at = sys.argv[1:8]
    subjects = Path(subjects_file).read_text().split()
    kms = LocalKms.from_config({"path": keyring})
    client = ClientConfig(bootstrap, extra={"log_level": 0})
    with KeyManager(client, kms, topic=keys_topic, table_options={"readers_topic": readers_topic}) as manager:
        time.sleep(max(0.0, float(start_at) - time.time()))
        keys = manager.get_or_create(subjects)
        out = {}
        for subject, key in keys.items():
            assert isinstance(key, SubjectKey)
            context = RecordContext("t", subject.encode())
            envelope = seal(f"from a process for {subject}".encode(), key.key, key.ref, context)
            out[subject] = [key.key_id.hex(), base64.b64encode(envelope).decode()]
        counters = {name: manager.counters[name] for name in ("created", "discarded")}
    Path(out_file).write_text(json.dumps({"keys": out, **counters}))


if __name__ == "__main__":
    main()
