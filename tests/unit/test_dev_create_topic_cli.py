"""`strongroom dev create-topic` without a cluster to talk to is a usage error, not a traceback."""

from __future__ import annotations

import subprocess
import sys


def test_without_bootstrap_and_without_a_running_dev_stack_it_asks_for_the_cluster() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "strongroom.cli.main", "dev", "create-topic", "orders"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--bootstrap-server is required" in done.stderr
    assert "Traceback" not in done.stderr
