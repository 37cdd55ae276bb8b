"""The package layering in docs/architecture.md, enforced: each package imports only what it may.

Imports are read from the source (AST), including imports inside functions, so a lazy import of
Spark in the wire-format core fails here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "strongroom"

#: package -> top-level modules it must never import (strongroom subpackages and third-party roots).
FORBIDDEN: dict[str, set[str]] = {
    "envelope": {"strongroom.kafka", "strongroom.spark", "strongroom.cli", "strongroom.kms", "strongroom.keys",
                 "strongroom.audit", "strongroom.recovery", "strongroom.doctor", "strongroom.testing",
                 "confluent_kafka", "pyspark", "click", "hvac", "boto3"},
    "crypto": {"strongroom.kafka", "strongroom.spark", "strongroom.cli", "strongroom.kms", "strongroom.keys",
               "strongroom.audit", "strongroom.recovery", "strongroom.doctor", "strongroom.testing",
               "confluent_kafka", "pyspark", "click", "hvac", "boto3"},
    "kms": {"strongroom.kafka", "strongroom.spark", "strongroom.cli", "strongroom.keys", "strongroom.audit",
            "strongroom.recovery", "strongroom.doctor", "strongroom.testing", "confluent_kafka", "pyspark", "click"},
    "keys": {"strongroom.cli", "strongroom.audit", "strongroom.recovery", "strongroom.doctor", "strongroom.testing",
             "strongroom.demo"},
    "kafka": {"strongroom.cli", "strongroom.spark", "strongroom.audit", "strongroom.recovery", "strongroom.doctor",
              "strongroom.testing", "strongroom.demo", "pyspark"},
    "spark": {"strongroom.cli", "strongroom.doctor", "strongroom.demo"},
    "audit": {"strongroom.cli", "strongroom.demo", "strongroom.recovery", "strongroom.doctor"},
    "recovery": {"strongroom.cli", "strongroom.demo", "strongroom.doctor"},
    "doctor": {"strongroom.cli", "strongroom.demo", "strongroom.spark", "pyspark"},
    "testing": {"strongroom.cli", "strongroom.demo"},
}  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def violations(package: str) -> list[str]:
    bad: list[str] = []
    for path in sorted((SRC / package).rglob("*.py")):
        for module in imported_modules(path):
            for forbidden in FORBIDDEN[package]:
                if module == forbidden or module.startswith(forbidden + "."):
                    bad.append(f"{path.relative_to(SRC.parent)} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_layering(package: str) -> None:
    assert violations(package) == []
