"""JSON Schema records: the schema's properties with their ``confluent:tags``, and the payload codec.

The walk follows ``properties`` (fields), ``items`` (array items), ``additionalProperties`` (map values),
``anyOf``/``oneOf``/``allOf`` (unions, transparent) and local ``$ref`` s (``#/definitions/..``,
``#/$defs/..``). A selected property must be a plain ``string``: one with ``format``, ``pattern``,
``maxLength``, ``enum`` or ``const`` could not hold an ``sr1:`` string and stay valid, so it is refused
at rule validation like any other type. Payloads are read strictly (as JSON field mode reads documents)
and validated against the schema before sealing, so a payload that does not match is refused, never sealed
half-way.
"""

from __future__ import annotations

import json
from typing import Any, Final

from strongroom.envelope.errors import NotJson
from strongroom.envelope.json_fields import load_json_object
from strongroom.schemas.errors import PayloadMismatch, UnsupportedSchema
from strongroom.schemas.fields import LeafKind, SchemaField, Step

_CONSTRAINTS: Final = ("format", "pattern", "maxLength", "enum", "const")
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class JsonSchemaFormat:
    def __init__(self, text: str, where: str) -> None:
        self.where = where
        try:
            self.schema: Any = json.loads(text)
            import jsonschema

            named = isinstance(self.schema, dict) and "$schema" in self.schema
            default = None if named else jsonschema.Draft7Validator
            validator_class = jsonschema.validators.validator_for(self.schema, default=default)
        except Exception as exc:  # noqa: BLE001 - any parse failure is one clear message
            raise UnsupportedSchema(f"{where} is not a usable JSON Schema: {type(exc).__name__}: {exc}") from None
        if validator_class is None:  # validated by guesswork, a record could pass that the schema refuses
            raise UnsupportedSchema(
                f"{where} names the meta-schema {self.schema['$schema']!r}, which is not a JSON Schema draft "
                "strongroom knows (drafts 3, 4, 6, 7, 2019-09 and 2020-12; the JVM engine reads 4 to 2020-12)"
            )
        try:
            validator_class.check_schema(self.schema)
            self._validator = validator_class(self.schema)
        except Exception as exc:  # noqa: BLE001 - any parse failure is one clear message
            raise UnsupportedSchema(f"{where} is not a usable JSON Schema: {type(exc).__name__}: {exc}") from None

    # ------------------------------------------------------------------ schema
    def fields(self) -> list[SchemaField]:
        out: list[SchemaField] = []
        self._walk(self.schema, (), out, (), frozenset())
        return out

    def _resolve(self, node: Any, stack: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise UnsupportedSchema(
                    f"{self.where} uses the reference {ref!r}; only local #/... references are read"
                )
            if ref in stack:
                return None, stack
            target: Any = self.schema
            for part in ref[2:].split("/"):
                target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
            if target is None:
                raise UnsupportedSchema(f"{self.where} references {ref!r}, which it does not define")
            node, stack = target, (*stack, ref)
        return node, stack

    def _walk(self, node: Any, steps: tuple[Step, ...], out: list[SchemaField], stack: tuple[str, ...],
              tags: frozenset[str]) -> None:  # fmt: skip
        """Every property below ``node``; ``tags`` are those of the array/map property whose items this is."""
        node, stack = self._resolve(node, stack)
        if not isinstance(node, dict):
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for branch in node.get(key) or ():
                self._walk(branch, steps, out, stack, tags)
        for name, prop in (node.get("properties") or {}).items():
            step_path = (*steps, Step("field", name))
            resolved, _ = self._resolve(prop, stack)
            leaf, nullable, type_name = self._leaf(resolved, stack)
            prop_tags = frozenset(resolved.get("confluent:tags") or ()) if isinstance(resolved, dict) else frozenset()
            if isinstance(prop, dict) and prop.get("confluent:tags"):
                prop_tags |= frozenset(prop["confluent:tags"])
            if leaf == "other" and self._container_of_strings(resolved, stack):
                leaf, type_name = "container", f"collection of {type_name}"
            out.append(SchemaField(step_path, leaf, type_name, prop_tags, nullable))
            self._walk(prop, step_path, out, stack, prop_tags)
        for key, kind in (("items", "items"), ("additionalProperties", "values")):
            inner = node.get(key)
            if isinstance(inner, dict):
                inner_steps = (*steps, Step(kind))  # type: ignore[arg-type]
                resolved, _ = self._resolve(inner, stack)
                leaf, nullable, type_name = self._leaf(resolved, stack)
                if leaf == "string":
                    out.append(SchemaField(inner_steps, leaf, type_name, tags, nullable))
                self._walk(inner, inner_steps, out, stack, frozenset())

    def _container_of_strings(self, node: Any, stack: tuple[str, ...]) -> bool:
        if not isinstance(node, dict):
            return False
        for key in ("items", "additionalProperties"):
            inner = node.get(key)
            if isinstance(inner, dict) and self._leaf(self._resolve(inner, stack)[0], stack)[0] == "string":
                return True
        return False

    def _leaf(self, node: Any, stack: tuple[str, ...]) -> tuple[LeafKind, bool, str]:
        if not isinstance(node, dict):
            return "other", False, "any"
        types = node.get("type")
        names = set(types) if isinstance(types, list) else {types} if isinstance(types, str) else set()
        for key in ("anyOf", "oneOf"):
            for branch in node.get(key) or ():
                branch, _ = self._resolve(branch, stack)
                if isinstance(branch, dict) and isinstance(branch.get("type"), str):
                    names.add(branch["type"])
                    if branch["type"] == "string" and any(c in branch for c in _CONSTRAINTS):
                        names.add("constrained string")
        nullable = "null" in names
        names.discard("null")
        constrained = [c for c in _CONSTRAINTS if c in node]
        if names == {"string"} and not constrained:
            return "string", nullable, "string"
        if names == {"string"}:
            return "other", nullable, f"string with {', '.join(constrained)}"
        return "other", nullable, "|".join(sorted(names)) or "any"

    # ------------------------------------------------------------------ payloads
    def decode(self, payload: bytes) -> Any:
        try:
            document = load_json_object(payload)
        except NotJson as exc:
            raise PayloadMismatch(f"payload of {self.where} is not usable JSON: {exc.problem}") from None
        except Exception as exc:  # noqa: BLE001 - NotJsonObject and friends
            raise PayloadMismatch(f"payload of {self.where}: {getattr(exc, 'problem', exc)}") from None
        return document

    def validate(self, document: Any) -> None:
        error = next(iter(self._validator.iter_errors(document)), None)
        if error is not None:
            where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            raise PayloadMismatch(f"payload does not match {self.where} at {where}: {error.validator} failed")

    def encode(self, document: Any) -> bytes:
        try:
            return _ENCODER.encode(document).encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise PayloadMismatch(f"record cannot be written back as JSON: {exc}") from None
