"""The process helpers every launcher relies on, exercised with real child processes."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from strongroom.errors import StackError
from strongroom.testing.process import ManagedProcess, free_port, pid_alive, port_answers, port_is_free


def test_free_port_span() -> None:
    for span in (1, 2, 5):
        port = free_port(span=span)
        assert all(port_is_free(port + i) for i in range(span))


def test_port_answers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_answers(port)
        assert not port_is_free(port)


def test_kill_and_stop(tmp_path: Path) -> None:
    proc = ManagedProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log")
    proc.start()
    assert proc.pid is not None
    assert pid_alive(proc.pid)
    proc.kill()
    assert not proc.running()
    proc.start()
    proc.stop(timeout=5)
    assert not proc.running()


def test_dead_process_reports_its_log(tmp_path: Path) -> None:
    code = "import sys; print('cannot bind: Address already in use'); sys.exit(3)"
    proc = ManagedProcess("failing server", [sys.executable, "-c", code], tmp_path / "server.log")
    proc.start()
    with pytest.raises(StackError) as err:
        proc.wait_until(lambda: False, 10, "port answers")
    assert "exited with code 3" in str(err.value)
    assert "Address already in use" in str(err.value)
    assert str(tmp_path / "server.log") in err.value.hint


def test_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="not found"):
        ManagedProcess("ghost", ["/nonexistent/java"], tmp_path / "log").start()
