"""Fixtures of the audit's integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.audit.store import LedgerPaths


@pytest.fixture
def ledger(tmp_path: Path) -> LedgerPaths:
    return LedgerPaths(str(tmp_path / "ledger"))
