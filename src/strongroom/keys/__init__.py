"""Per-subject key lifecycle: keys topic, key table, erasure and its verification.

The hierarchy: KMS KEK → wrapping keys (one KMS call each, wrapping up to a million subject keys) →
subject keys (random AES-256 keys, one per data subject). KMS calls grow with wrapping keys, not
subjects. See docs/shredding.md for the design, the record layouts and the ordering rules.

Public API:

- :class:`KeyManager` (encryptors): ``get_or_create(subjects)`` → :class:`SubjectKey` or
  :class:`PolicyDecision` per subject, one flush per batch, race-free across processes; ``charge`` (or
  a :class:`~strongroom.keys.cache.KeyCache`) applies the :class:`SubjectKeyLimits` (seal bound across
  writers, key age) and rotates a subject to a new key when its key reaches them;
- :class:`KeyTable` (readers): ``lookup``, ``key_lookup`` / ``key_lookup_for`` for the envelope,
  ``subject_state``, ``current_key``, ``subjects_under_kek``, ``chain_of``, ``wait_caught_up``;
- :func:`erase` → :class:`ErasureReceipt`; :func:`erasure_status` → :class:`ErasureStatus` per subject;
- :func:`declare_lost` / :func:`undeclare_lost` → :class:`LostReceipt`: lost markers for wrapping keys whose
  KEK is gone (readers then raise :class:`SubjectKeyLost`, a ``SubjectErased``, for their subject keys);
- :func:`rewrap` (KEK rotation), :func:`create_keys_topic`, :class:`SubjectExtractor`.
"""

from strongroom.keys.erasure import ErasureReceipt, SubjectErasure, erase, read_subjects_file
from strongroom.keys.errors import SubjectKeyLost
from strongroom.keys.lost import LostReceipt, declare_lost, undeclare_lost
from strongroom.keys.manager import DEFAULT_KEK_ALIAS, KeyManager, KeyOrDecision, PolicyDecision, PostErasurePolicy
from strongroom.keys.murmur2 import murmur2, partition_for, subject_partition
from strongroom.keys.readers import ReaderHeartbeat, forget_reader, read_registry
from strongroom.keys.rewrap import RewrapReport, rewrap
from strongroom.keys.subjects import MissingSubjectPolicy, SubjectExtractor, SubjectExtractors, SubjectMissingInfo
from strongroom.keys.table import ErasureInfo, KeyChainLink, KeyTable, SubjectKey, SubjectState
from strongroom.keys.topic import KeysTopic, create_keys_topic
from strongroom.keys.topic_config import KEYS_TOPIC_CONFIG, KEYS_TOPIC_DEFAULT, READERS_TOPIC_DEFAULT
from strongroom.keys.usage import SubjectKeyLimits
from strongroom.keys.verification import ErasureStatus, erasure_status
from strongroom.keys.wrapping import WrappingKeyPolicy

__all__ = [
    "DEFAULT_KEK_ALIAS",
    "KEYS_TOPIC_CONFIG",
    "KEYS_TOPIC_DEFAULT",
    "READERS_TOPIC_DEFAULT",
    "ErasureInfo",
    "ErasureReceipt",
    "ErasureStatus",
    "KeyChainLink",
    "KeyManager",
    "KeyOrDecision",
    "KeyTable",
    "KeysTopic",
    "LostReceipt",
    "MissingSubjectPolicy",
    "PolicyDecision",
    "PostErasurePolicy",
    "ReaderHeartbeat",
    "RewrapReport",
    "SubjectErasure",
    "SubjectExtractor",
    "SubjectExtractors",
    "SubjectKey",
    "SubjectKeyLimits",
    "SubjectKeyLost",
    "SubjectMissingInfo",
    "SubjectState",
    "WrappingKeyPolicy",
    "create_keys_topic",
    "declare_lost",
    "erase",
    "erasure_status",
    "forget_reader",
    "murmur2",
    "partition_for",
    "read_registry",
    "read_subjects_file",
    "rewrap",
    "subject_partition",
    "undeclare_lost",
]
