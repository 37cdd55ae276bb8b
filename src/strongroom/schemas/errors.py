"""Leaf errors of schema-aware encryption (Confluent wire format, schema registry, tagged fields).

Record-level problems (no magic byte, an unknown schema id, a payload that does not match its schema,
a tagged field of a type that cannot hold an envelope) are :class:`~strongroom.errors.EnvelopeError`
leaves, so the producer rejects such a record and the consumer fails it under their failure policies,
exactly like a value that is not JSON in field mode. A registry that cannot be reached is not about the
record: :class:`RegistryUnavailable` is raised after the client has waited for it, and nothing is written.

Messages name the schema id, the field path and the registry URL; never a credential or a field's value.
"""

from __future__ import annotations

from strongroom.errors import ConfigError, EnvelopeError, StrongroomError


class SchemaRecordError(EnvelopeError):
    """A record the schema-aware mode cannot handle."""

    default_hint = "fix the producer of this record, or route it elsewhere (on_reject / on_failure)"


class NotFramed(SchemaRecordError):
    """The value does not start with the Confluent wire format (magic byte 0, 4-byte schema id)."""

    default_hint = (
        "schema-aware rules read values written by a schema-registry serializer (Avro, JSON Schema, Protobuf); "
        "use mode 'value' or 'fields' for this topic, or fix the producer"
    )


class UnknownSchemaId(SchemaRecordError):
    """The registry does not know the record's schema id."""

    default_hint = "check that producers and strongroom use the same schema registry (URL and context)"


class PayloadMismatch(SchemaRecordError):
    """The payload cannot be read with the schema its id names."""

    default_hint = "the producer wrote bytes its schema does not describe; quarantine the record and check it"


class TaggedFieldType(SchemaRecordError):
    """A field the rule selects (by tag or path) is not a string or bytes field, so it cannot hold an envelope."""

    default_hint = (
        "tag only string or bytes fields, or change the field's type (strongroom keeps records valid for "
        "their schema, so a sealed value must be a string or bytes)"
    )


class UnsupportedSchema(SchemaRecordError):
    """A schema type or construct schema-aware mode does not handle."""

    default_hint = "see docs/schema-aware.md for what is supported"


class SchemaRegistryError(StrongroomError):
    """The schema registry failed or refused a request (not about one record)."""

    default_hint = "check the schema registry URL, credentials and that it is up"


class RegistryUnavailable(SchemaRegistryError):
    """The registry stayed unreachable longer than the client waits: nothing was written, nothing guessed."""

    default_hint = "restore the schema registry and retry: records are held, never guessed or written in plaintext"


class RegistryRefused(SchemaRegistryError, ConfigError):
    """The registry refused the credentials (401/403) or the request."""

    default_hint = "check the registry's basic-auth user/password or bearer token"


class UnknownFieldPath(SchemaRecordError):
    """A field path the rule lists explicitly is not in the record's schema."""

    default_hint = "fix the rule's field path (dotted, [*] for array items and map values) or the schema"
