"""Avro payload bytes without a registry (for records the serializer would refuse to write)."""

from __future__ import annotations

import io
from typing import Any

import fastavro


def avro_payload(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()
