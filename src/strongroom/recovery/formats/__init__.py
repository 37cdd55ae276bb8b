"""Record formats recovery can read: strongroom's envelopes and Kroxylicious's wrapper V2.

:func:`record_format` builds one from the CLI's ``--format`` / ``--kms`` choice.
"""

from __future__ import annotations

from strongroom.recovery.errors import UnknownRecordFormat
from strongroom.recovery.formats.base import MalformedPrefix, RecordFormat
from strongroom.recovery.formats.kroxylicious import KroxyliciousFormat, KroxyliciousInMemoryKms
from strongroom.recovery.formats.strongroom import DEFAULT_KMS_KINDS, StrongroomFormat

FORMATS = ("strongroom", "kroxylicious")


def record_format(name: str, *, kms_kind: str | None = None, provider_name: str | None = None) -> RecordFormat:
    """The reader for ``--format name``; Kroxylicious also needs the kind of KMS that wrote the records."""
    if name == "strongroom":
        kinds = dict(DEFAULT_KMS_KINDS)
        if provider_name is not None and kms_kind is not None:
            kinds[provider_name] = kms_kind
        return StrongroomFormat(kinds)
    if name == "kroxylicious":
        if kms_kind is None:
            raise UnknownRecordFormat(
                "--format kroxylicious needs --kms: the records do not say which KMS wrapped their DEKs",
                hint="pass --kms vault, --kms aws or --kms inmemory",
            )
        return KroxyliciousFormat(kms_kind, provider_name)
    raise UnknownRecordFormat(f"unknown record format {name!r}")


__all__ = [
    "FORMATS",
    "KroxyliciousFormat",
    "KroxyliciousInMemoryKms",
    "MalformedPrefix",
    "RecordFormat",
    "StrongroomFormat",
    "record_format",
]
