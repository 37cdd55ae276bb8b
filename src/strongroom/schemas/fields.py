"""Which fields of a schema are sealed, and where they sit in a decoded record.

Each format module describes its schema as a flat list of :class:`SchemaField` (every field at every
depth: its canonical path, its type and its inline tags). A rule's selection (a tag set and explicit
paths) picks the :class:`FieldTarget` s from that list; a picked field that is not a string or bytes
field is :class:`TaggedFieldType` naming it, so a rule never promises ciphertext it cannot deliver.

Paths use JSON field mode's canonical text (:mod:`strongroom.envelope.jsonpath`): ``.name`` per record
field or property, ``[*]`` per array item and per map value; union branches are transparent. That text
is what the AAD binds, exactly as in JSON field mode.

:func:`target_slots` finds the present values of the targets in a decoded record, which is made of
dicts and lists (Avro via fastavro, JSON) or protobuf messages, repeated fields and maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from strongroom.envelope.jsonpath import FieldPath, render_path
from strongroom.schemas.errors import TaggedFieldType, UnknownFieldPath

StepKind = Literal["field", "items", "values"]
#: ``container``: an array or map of strings/bytes; its items (``[*]``) carry its tags and are the targets.
LeafKind = Literal["string", "bytes", "container", "other"]


class Step(NamedTuple):
    """One step from a value to a child: a record field / property (``name``), array items or map values.

    ``record`` constrains a field step to one Avro record type (a branch of a union of records)."""

    kind: StepKind
    name: str | None = None
    record: str | None = None


def path_text(steps: Iterable[Step]) -> str:
    return render_path(step.name if step.kind == "field" else None for step in steps)


@dataclass(frozen=True)
class SchemaField:
    """A field of a schema at some depth, as the format module found it."""

    steps: tuple[Step, ...]
    kind: LeafKind
    #: The schema's type for messages (``int``, ``record Address``, ``array<string>``).
    type_name: str
    tags: frozenset[str]
    nullable: bool = False

    @property
    def path(self) -> str:
        return path_text(self.steps)


@dataclass(frozen=True)
class FieldTarget:
    """A field the rule seals: where it is, and whether it holds a string or bytes."""

    path: str
    steps: tuple[Step, ...]
    kind: Literal["string", "bytes"]
    nullable: bool


@dataclass(frozen=True)
class Selection:
    """What a schema-aware rule seals: fields carrying any of ``tags``, plus the explicit ``paths``."""

    tags: frozenset[str]
    paths: tuple[str, ...] = ()

    def canonical_paths(self) -> frozenset[str]:
        return frozenset(FieldPath.parse(p).text for p in self.paths)


def select(fields: Iterable[SchemaField], selection: Selection, where: str) -> tuple[FieldTarget, ...]:
    """The targets ``selection`` picks among ``fields`` (of the schema ``where`` names)."""
    wanted_paths = selection.canonical_paths()
    seen_paths: set[str] = set()
    targets: dict[tuple[Step, ...], FieldTarget] = {}
    for field in fields:
        path = field.path
        seen_paths.add(path)
        tagged = selection.tags & field.tags
        if not tagged and path not in wanted_paths:
            continue
        if field.kind == "container" and path not in wanted_paths:
            continue  # its items carry the tags
        if field.kind in ("other", "container"):
            why = f"tagged {', '.join(sorted(tagged))}" if tagged else "listed in the rule"
            raise TaggedFieldType(
                f"field {path} of {where} is {why} but is of type {field.type_name}, which cannot hold an "
                "envelope (only string and bytes fields can"
                f"{'; list its items as ' + path + '[*]' if field.kind == 'container' else ''})"
            )
        kind: Literal["string", "bytes"] = "string" if field.kind == "string" else "bytes"
        targets[field.steps] = FieldTarget(path, field.steps, kind, field.nullable)
    missing = sorted(wanted_paths - seen_paths)
    if missing:
        raise UnknownFieldPath(f"the rule lists field {missing[0]}, which {where} does not have")
    return tuple(targets.values())


# ------------------------------------------------------------------------------------------ records
def _is_message(node: Any) -> bool:
    return hasattr(node, "DESCRIPTOR") and hasattr(node, "ListFields")


def _children(node: Any, step: Step) -> Iterator[Any]:
    if isinstance(node, tuple):  # an Avro union branch read as (record name, record)
        name, node = node
        if step.record is not None and name != step.record:
            return
    if node is None:
        return
    if step.kind == "field":
        if _is_message(node):
            assert step.name is not None
            descriptor = node.DESCRIPTOR.fields_by_name.get(step.name)
            if descriptor is None:
                return
            if descriptor.message_type is not None and not _repeated(descriptor) and not node.HasField(step.name):
                return  # an unset message: nothing to seal, and reading it must not create it
            yield getattr(node, step.name)
        elif isinstance(node, dict) and step.name in node:
            yield node[step.name]
    elif step.kind == "items":
        if isinstance(node, list) or (_is_message_container(node) and not hasattr(node, "keys")):
            yield from node
    elif isinstance(node, dict) or (_is_message_container(node) and hasattr(node, "keys")):
        yield from (node[key] for key in _keys(node))


def _unset(message: Any, name: str | None) -> bool:
    """A field that tracks presence (``optional``, a oneof member) and is not set: there is nothing to seal, and
    setting it would make it present (and clear the member of its oneof that is set)."""
    descriptor = message.DESCRIPTOR.fields_by_name.get(name)
    return (
        descriptor is not None
        and not _repeated(descriptor)
        and bool(descriptor.has_presence)
        and not message.HasField(name)
    )


def _repeated(descriptor: Any) -> bool:
    return bool(descriptor.is_repeated)


def _is_message_container(node: Any) -> bool:
    return type(node).__module__.startswith("google")


def _keys(mapping: Any) -> list[Any]:
    """A map's keys in the order its values are visited: a dict's as they came; a protobuf map's in the order
    ``SerializeToString(deterministic=True)`` writes its entries (its own order is its hash table's), so every
    engine seals its values in one order and writes them in it."""
    return sorted(mapping.keys(), key=_written_order) if _is_message_container(mapping) else list(mapping.keys())


def _written_order(key: Any) -> Any:
    """upb's deterministic map order: strings by UTF-8 bytes with a longer string before its own prefix,
    integers by descending unsigned 64-bit value, ``True`` before ``False`` (the JVM engine sorts alike)."""
    if isinstance(key, bool):
        return not key
    if isinstance(key, int):
        return -(key & 0xFFFF_FFFF_FFFF_FFFF)
    return (*key.encode("utf-8"), 256)


class Slot(NamedTuple):
    container: Any
    slot: Any
    target: FieldTarget


def target_slots(root: Any, targets: Iterable[FieldTarget]) -> list[Slot]:
    """Every present value of ``targets`` in the decoded record ``root``."""
    found: list[Slot] = []
    for target in targets:
        *parents, last = target.steps
        nodes = [root]
        for step in parents:
            nodes = [child for node in nodes for child in _children(node, step)]
        for node in nodes:
            found.extend(_last_slots(node, last, target))
    return found


def _last_slots(node: Any, step: Step, target: FieldTarget) -> Iterator[Slot]:
    if isinstance(node, tuple):
        name, node = node
        if step.record is not None and name != step.record:
            return
    if node is None:
        return
    if step.kind == "field":
        if _is_message(node):
            if not _unset(node, step.name):
                yield Slot(node, step.name, target)
        elif isinstance(node, dict) and step.name in node:
            yield Slot(node, step.name, target)
    elif step.kind == "items":
        if isinstance(node, list) or (_is_message_container(node) and not hasattr(node, "keys")):
            yield from (Slot(node, i, target) for i in range(len(node)))
    elif isinstance(node, dict) or (_is_message_container(node) and hasattr(node, "keys")):
        yield from (Slot(node, key, target) for key in _keys(node))


def get_value(slot: Slot) -> Any:
    if _is_message(slot.container):
        return getattr(slot.container, slot.slot)
    return slot.container[slot.slot]


def set_value(slot: Slot, value: Any) -> None:
    if _is_message(slot.container):
        if value is None:
            slot.container.ClearField(slot.slot)
        else:
            setattr(slot.container, slot.slot, value)
    else:
        slot.container[slot.slot] = value
