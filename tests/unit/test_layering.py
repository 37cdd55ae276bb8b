"""The package layering in docs/architecture.md, enforced on every import (including imports inside
functions): each top-level unit of strongroom imports only units of lower layers, so there is no
package cycle and no upward import; a few layers also keep third-party libraries out.

Imports are read from the source (AST), so a lazy import of Spark in the wire-format core fails here too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "strongroom"

#: Bottom to top. A unit may import units of lower layers only (never its own layer's others).
LAYERS: list[set[str]] = [
    {"_collector"},  # C, built by make: runtime.untracked's untrack (imports nothing)
    {"errors", "paths", "_resources", "text", "runtime", "policies", "metrics"},
    {"crypto"},
    {"envelope"},
    {"kms", "rules"},
    {"schemas"},  # schema-aware encryption: registry client, Avro/JSON Schema/Protobuf fields (no Kafka)
    {"kafka"},  # the transport: config, topics, every confluent-kafka client
    {"keys"},
    {"clients", "doctor"},
    {"spark"},
    {"audit"},
    {"recovery"},
    {"testing"},
    {"demo"},
    {"cli"},
]

#: Third-party roots a unit must not import.
FORBIDDEN_LIBRARIES: dict[str, set[str]] = {
    "envelope": {"confluent_kafka", "pyspark", "click", "hvac", "boto3"},
    "crypto": {"confluent_kafka", "pyspark", "click", "hvac", "boto3"},
    "kms": {"confluent_kafka", "pyspark", "click"},
    "schemas": {"pyspark", "click"},
    "kafka": {"pyspark", "click"},
    "keys": {"pyspark", "click"},
    "clients": {"pyspark", "click"},
    "doctor": {"pyspark", "click"},
    "text": {"click"},
}


def unit_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def import_graph(root: Path, package: str) -> dict[str, dict[str, list[str]]]:
    """unit -> imported unit -> the files that import it (units: the package's top-level modules/packages)."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(root.rglob("*.py")):
        unit = unit_of(path, root)
        if unit == "__init__":
            continue  # the package's own facade: lazy re-exports for users (strongroom/__init__.py)
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == package and len(parts) > 1 and parts[1] != unit:
                graph[unit][parts[1]].append(str(path.relative_to(root.parent)))
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Every strongly connected component of more than one unit (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(graph) | {n for edges in graph.values() for n in edges}):
        if node not in index:
            visit(node)
    return found


def upward_imports(graph: dict[str, dict[str, list[str]]], layers: list[set[str]]) -> list[str]:
    rank = {unit: i for i, layer in enumerate(layers) for unit in layer}
    bad = []
    for unit, edges in sorted(graph.items()):
        for target, files in sorted(edges.items()):
            if unit not in rank or target not in rank:
                bad.append(f"{unit} -> {target}: a unit no layer names ({files[0]}); add it to LAYERS")
            elif rank[target] >= rank[unit]:
                bad.append(f"{unit} (layer {rank[unit]}) imports {target} (layer {rank[target]}) in {files[0]}")
    return bad


def test_no_package_cycles() -> None:
    assert cycles(import_graph(SRC, "strongroom")) == []


def test_every_import_goes_down_the_layers() -> None:
    assert upward_imports(import_graph(SRC, "strongroom"), LAYERS) == []


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(p, SRC) for p in SRC.rglob("*.py")} - {"__init__", "__main__"}
    assert sorted(units - set().union(*LAYERS)) == []


@pytest.mark.parametrize("unit", sorted(FORBIDDEN_LIBRARIES))
def test_third_party_libraries_stay_out_of_the_core(unit: str) -> None:
    paths = sorted((SRC / unit).rglob("*.py")) if (SRC / unit).is_dir() else [SRC / f"{unit}.py"]
    bad = [
        f"{path.relative_to(SRC.parent)} imports {module}"
        for path in paths
        for module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN_LIBRARIES[unit]
    ]
    assert bad == []


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """A synthetic package: ``low`` imports ``high`` inside a function, ``high`` imports ``low``."""
    root = tmp_path / "pkg"
    (root / "low").mkdir(parents=True)
    (root / "high").mkdir()
    (root / "__init__.py").write_text("")
    (root / "low" / "__init__.py").write_text("def f():\n    from pkg.high.thing import g\n    return g\n")
    (root / "high" / "__init__.py").write_text("")
    (root / "high" / "thing.py").write_text("from pkg.low import f\n\ndef g():\n    return f\n")
    graph = import_graph(root, "pkg")
    assert cycles(graph) == [["high", "low"]]
    assert upward_imports(graph, [{"low"}, {"high"}]) == ["low (layer 0) imports high (layer 1) in pkg/low/__init__.py"]
    (root / "low" / "__init__.py").write_text("")
    fixed = import_graph(root, "pkg")
    assert cycles(fixed) == []
    assert upward_imports(fixed, [{"low"}, {"high"}]) == []


def test_the_package_exports_the_quick_start_names() -> None:
    import strongroom
    from strongroom import clients

    for name in strongroom.__all__:
        assert getattr(strongroom, name) is not None, name
    assert {"DecryptingConsumer", "EncryptingProducer", "ProducerRecord"} <= set(clients.__all__)
    with pytest.raises(AttributeError):
        _ = strongroom.NoSuchThing  # type: ignore[attr-defined]


def test_no_command_module_imports_a_sibling() -> None:
    """CLI command groups share options, factories and output only (``main`` assembles the groups)."""
    shared = {"strongroom.cli.common", "strongroom.cli.factories", "strongroom.cli.output"}
    bad = []
    for path in sorted((SRC / "cli").glob("*.py")):
        if path.stem in ("main", "__init__", "common", "factories", "output"):
            continue
        for module in imported_modules(path):
            if module.startswith("strongroom.cli.") and module not in shared:
                bad.append(f"{path.name} imports {module}")
    assert bad == []
