"""A moto server speaking the AWS KMS API on 127.0.0.1, for tests of the AWS provider.

Fidelity gap to remember: moto keeps decrypting with a Disabled or PendingDeletion key, where real
AWS refuses (DisabledException / KMSInvalidStateException). Lost-key paths are therefore tested with
OpenBao and the local KMS; the AWS provider's mapping of those errors is tested on the error codes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from strongroom.testing.process import ManagedProcess, free_port, port_answers, require_free_ports

REGION = "us-east-1"
#: moto accepts any credentials; these make boto3 sign requests without touching ~/.aws.
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class MotoServer:
    """``python -m moto.server`` as a child process."""

    def __init__(self, *, port: int | None = None, detached: bool = False, log_dir: Path | None = None):
        self.port = port or free_port()
        self.region = REGION
        self.detached = detached
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="strongroom-moto-"))
        self.process: ManagedProcess | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> MotoServer:
        require_free_ports("moto server", self.port)
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        env = {**os.environ, "AWS_DEFAULT_REGION": self.region}
        self.process = ManagedProcess("moto server", argv, self.log_dir / "moto.log", env=env, detached=self.detached)
        self.process.start()
        try:
            self.process.wait_until(lambda: port_answers(self.port), timeout, f"port {self.port} answers")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str = "kms") -> Any:
        import boto3

        return boto3.client(service, region_name=self.region, endpoint_url=self.endpoint_url, **CREDENTIALS)

    def describe(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "pid": self.process.pid if self.process else None,
        }
