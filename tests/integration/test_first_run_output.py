"""A newcomer's first run is quiet and clean (issue 15 item 4): ``strongroom demo`` prints no raw librdkafka
line (``%4|…|GETPID|…``, ``%3|…|FAIL|… Connection refused`` after the stack stopped) and no deprecation
banner, and installing strongroom (what ``make install`` runs) prints no setuptools banner about its
license metadata."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from strongroom.testing.quiet_run import offending_lines

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_prints_no_raw_librdkafka_line_and_no_deprecation_banner() -> None:
    """``make demo`` runs the demo through the same check (``strongroom.testing.quiet_run``); CI, which runs
    ``make demo`` right after ``make test``, deselects this test rather than run the demo twice."""
    done = subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", "demo"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Stack stopped. Demo complete." in done.stdout
    assert offending_lines(done.stdout) == []


def test_installing_strongroom_prints_no_license_deprecation_banner() -> None:
    """What the Makefile's install step runs, as a dry run: the build backend reads pyproject.toml's
    metadata (setuptools from PyPI, in pip's isolated build environment) and installs nothing."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "-e", str(ROOT)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Would install strongroom" in done.stdout
    assert offending_lines(done.stdout) == []
