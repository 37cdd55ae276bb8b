"""Additional authenticated data: what an envelope is bound to.

AAD = ``"strongroom/v1"`` ‖ header (every envelope byte before the nonce) ‖ u16be len + topic ‖
u32be len + subject ‖ u16be len + field path. Fixed-width big-endian lengths and concatenation only,
so the Spark pipelines can build the same bytes with column expressions.

Binding the header makes every id byte and the key reference tamper-evident (no downgrade by
flipping the profile byte). Binding topic + subject + field path makes a ciphertext fail to open
anywhere else. Partition and offset are deliberately *not* bound: repartitioning and mirroring
change them, and the offset is unknown when a record is produced. The bound topic may be a
*logical* name: readers of a mirror pass a physical→logical mapping (``us.orders`` → ``orders``);
the PORTABLE profile binds no topic at all for data that is renamed freely.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from strongroom.envelope.errors import EncodingLimitExceeded
from strongroom.envelope.ids import AAD_LABEL, AadProfile
from strongroom.envelope.keyref import KeyRef

_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_PORTABLE: Final = AadProfile.PORTABLE


@dataclass(slots=True)
class RecordContext:
    """Where a record lives: its (logical) topic, its subject bytes, and the AAD profile to seal with.

    ``subject`` is the per-subject id for SUBJECT_KEY envelopes and the record key bytes (``b""``
    for a null key) for WRAPPED_DEK envelopes. ``profile`` matters only when sealing; opening
    uses the profile recorded in the envelope.

    One is built per record, so it is a plain slotted class (half the construction cost of a
    NamedTuple); treat it as immutable and derive variants with :meth:`replace`.
    """

    topic: str
    subject: bytes
    profile: AadProfile = AadProfile.TOPIC

    def replace(self, **changes: Any) -> RecordContext:
        return dataclasses.replace(self, **changes)


def bound_topic(profile: AadProfile, topic: str, topic_map: Mapping[str, str] | None = None) -> str:
    """The topic name the AAD binds: the logical name for TOPIC, empty for PORTABLE."""
    if profile == _PORTABLE:
        return ""
    if topic_map:
        return topic_map.get(topic, topic)
    return topic


#: (header, bound topic, field path) → (AAD bytes before the subject, AAD bytes after it).
#: Records of one topic share a handful of headers and paths, so the fixed parts are built once.
_FRAMES: dict[tuple[bytes, str, str], tuple[bytes, bytes]] = {}
aad_frame = _FRAMES.get
_MAX_FRAMES: Final = 65536  # one per (key, topic, path): sized for tens of thousands of active subjects


def new_aad_frame(header: bytes, topic: str, field_path: str) -> tuple[bytes, bytes]:
    topic_bytes = topic.encode("utf-8")
    path_bytes = field_path.encode("utf-8")
    if len(topic_bytes) > 0xFFFF or len(path_bytes) > 0xFFFF:
        raise EncodingLimitExceeded(
            f"topic ({len(topic_bytes)} bytes) or field path ({len(path_bytes)} bytes) "
            "is longer than the AAD allows (65535 bytes)"
        )
    frame = (
        b"".join((AAD_LABEL, header, _U16.pack(len(topic_bytes)), topic_bytes)),
        _U16.pack(len(path_bytes)) + path_bytes,
    )
    if len(_FRAMES) >= _MAX_FRAMES:
        _FRAMES.clear()
    _FRAMES[header, topic, field_path] = frame
    return frame


def build_aad(header: bytes, topic: str, subject: bytes, field_path: str = "") -> bytes:
    """The AAD from an envelope header and the already profile-resolved topic (see :func:`bound_topic`)."""
    frame = _FRAMES.get((header, topic, field_path)) or new_aad_frame(header, topic, field_path)
    if len(subject) > 0xFFFFFFFF:
        raise EncodingLimitExceeded(f"subject of {len(subject)} bytes is longer than the AAD allows")
    return b"".join((frame[0], _U32.pack(len(subject)), subject, frame[1]))


def aad_for(key_ref: KeyRef, ctx: RecordContext, field_path: str = "") -> bytes:
    """The exact AAD a record sealed with ``key_ref`` in ``ctx`` carries (reference for the Spark side)."""
    topic = bound_topic(ctx.profile, ctx.topic)
    return build_aad(key_ref.header(ctx.profile), topic, ctx.subject, field_path)
