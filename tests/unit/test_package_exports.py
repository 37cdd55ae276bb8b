"""The imports the docs show work: every ``from strongroom... import ...`` in a Python block of README.md
and docs/*.md names a module that imports and names that it has (a renamed or unexported name fails here,
not in a reader's first session)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_IMPORT_LINE = re.compile(r"^\s*from (strongroom[\w.]*) import ([\w, ]+)$", re.MULTILINE)


def _documented_imports() -> list[tuple[str, str, str]]:
    """``(doc, module, name)`` for every strongroom import in the docs' Python blocks."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in _PYTHON_BLOCK.findall(doc.read_text(encoding="utf-8")):
            try:
                tree = ast.parse(block)
            except SyntaxError:  # a block with prompts or elisions: its one-line imports still count
                pairs = [(m, n.strip()) for m, names in _IMPORT_LINE.findall(block) for n in names.split(",")]
            else:
                pairs = [
                    (node.module, alias.name)
                    for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("strongroom")
                    for alias in node.names
                ]
            found += [(doc.name, module, name) for module, name in pairs if name]
    return found


DOCUMENTED = _documented_imports()


def test_the_docs_show_the_short_imports() -> None:
    modules = {module for _, module, _ in DOCUMENTED}
    assert {"strongroom", "strongroom.clients", "strongroom.audit"} <= modules


@pytest.mark.parametrize(("doc", "module", "name"), DOCUMENTED, ids=[f"{d}:{m}.{n}" for d, m, n in DOCUMENTED])
def test_a_documented_import_works(doc: str, module: str, name: str) -> None:
    imported = importlib.import_module(module)
    assert hasattr(imported, name), f"{doc} imports {name} from {module}, which has no such name"


@pytest.mark.parametrize("package", ["strongroom", "strongroom.clients", "strongroom.kafka", "strongroom.audit"])
def test_every_exported_name_resolves(package: str) -> None:
    imported = importlib.import_module(package)
    exported = getattr(imported, "__all__", [])
    assert exported, f"{package} exports nothing"
    for name in exported:
        assert getattr(imported, name) is not None, f"{package}.{name}"
