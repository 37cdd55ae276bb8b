"""Processes the test kit starts: free ports, readiness waits, and a child that is always stopped.

Every server the kit launches (Kafka nodes, OpenBao, moto) runs as a :class:`ManagedProcess`: its own
session (so a kill reaches the whole process group), output to a log file the error messages name,
and an ``atexit`` hook so nothing is left running if the caller forgets to stop it. ``detached``
processes (``strongroom dev up``) skip the hook: they must outlive the command that started them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from strongroom.errors import StackError
from strongroom.runtime import pid_alive

_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()


def free_port(*, span: int = 1) -> int:
    """A TCP port on 127.0.0.1 that is free now; with ``span`` n, the n - 1 ports after it are free too.

    There is a window between this check and the server's bind; launchers retry on a bind failure.
    """
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port + span - 1 <= 65535 and all(port_is_free(port + i) for i in range(1, span)):
            return port
    raise StackError(
        f"no {span} consecutive free TCP ports found on 127.0.0.1", hint="stop some local servers and retry"
    )


def port_is_free(port: int) -> bool:
    """True when no listener holds the port (connections in TIME_WAIT do not count, as for servers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def require_free_ports(owner: str, *ports: int) -> None:
    """Fail before launching when a port is taken (a readiness check could be fooled by its owner)."""
    taken = [p for p in ports if not port_is_free(p)]
    if taken:
        raise StackError(
            f"cannot start {owner}: port {', '.join(map(str, taken))} on 127.0.0.1 is already in use",
            hint="stop the process that holds it (`ss -ltnp` shows it) or let strongroom pick free ports",
        )


def port_answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


class ManagedProcess:
    """A child process with a log file, stopped on exit unless ``detached``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        detached: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.detached = detached
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise StackError(
                f"cannot start {self.name}: program {self.argv[0]!r} not found",
                hint="run `make` to install what strongroom needs (Java 17 must be on PATH)",
            ) from exc
        finally:
            log.close()
        if not self.detached:
            _LIVE.add(self)

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``ready`` until true; fail with the log tail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if not self.running():
                code = self._proc.returncode if self._proc else None
                raise StackError(
                    f"{self.name} exited with code {code} before {what}; last log lines:\n{tail(self.log_path)}",
                    hint=f"see the full log at {self.log_path}",
                )
            time.sleep(0.1)
        raise StackError(
            f"{self.name} did not become ready ({what}) within {timeout:.0f}s; last log lines:\n{tail(self.log_path)}",
            hint=f"see the full log at {self.log_path}",
        )

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL it if it has not exited within ``timeout``."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait(10)
        _LIVE.discard(self)

    def kill(self) -> None:
        """SIGKILL the process group at once (fault injection: no clean shutdown)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._signal(signal.SIGKILL)
            self._proc.wait(10)
        _LIVE.discard(self)

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)


def kill_pid_group(pid: int, timeout: float = 15.0) -> None:
    """Stop a process group we started in another command (``dev down``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@atexit.register
def _stop_leftovers() -> None:
    for proc in list(_LIVE):
        with contextlib.suppress(Exception):
            proc.stop(timeout=5)
