"""Schema-aware encryption: records in the Confluent wire format (Avro, JSON Schema, Protobuf) whose
schema tags fields as personal data (``confluent:tags`` / ``confluent.field_meta``) get those fields
sealed in place, so the record stays valid for its schema id. See docs/schema-aware.md.

Avro needs ``fastavro``, JSON Schema ``jsonschema``, Protobuf ``protobuf`` and ``grpcio-tools`` (protoc):
``pip install 'strongroom[schemas]'``.
"""

from strongroom.schemas.fields import Selection
from strongroom.schemas.registry import RegistrySettings, SchemaRegistry

__all__ = ["RegistrySettings", "SchemaRegistry", "Selection"]
