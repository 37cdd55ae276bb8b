"""The driver's key service: TLS with a pinned certificate, a token on every request, clear errors."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import pytest

from strongroom.errors import KeysError, PipelineError
from strongroom.spark.keyservice import KeyService, KeyServiceClient, b64, unb64


def handler(op: str, args: dict[str, Any]) -> Any:
    if op == "echo":
        return {"subjects": args["subjects"], "key": b64(b"\x00" * 32)}
    if op == "refuse":
        raise KeysError("subject key 1234 cannot be unwrapped", hint="restore the KEK")
    raise RuntimeError("unexpected")


@pytest.fixture
def service() -> Any:
    svc = KeyService(handler)
    yield svc
    svc.close()


def test_round_trip_and_reuse(service: KeyService) -> None:
    client = KeyServiceClient(service.client_spec())
    for _ in range(3):
        result = client.call("echo", subjects=["a", "b"])
        assert result["subjects"] == ["a", "b"]
        assert unb64(result["key"]) == b"\x00" * 32
    big = [f"subject-{i}" for i in range(50_000)]
    assert client.call("echo", subjects=big)["subjects"] == big


def test_errors_come_back_with_their_hint(service: KeyService) -> None:
    client = KeyServiceClient(service.client_spec())
    with pytest.raises(PipelineError, match="subject key 1234 cannot be unwrapped") as err:
        client.call("refuse")
    assert err.value.hint == "restore the KEK"
    with pytest.raises(PipelineError, match="RuntimeError: unexpected"):
        client.call("other")


def test_wrong_token_is_refused(service: KeyService) -> None:
    spec = {**service.client_spec(), "token": "0" * 64}
    with pytest.raises(PipelineError, match="unauthenticated request"):
        KeyServiceClient(spec).call("echo", subjects=[])


def test_a_client_only_trusts_the_pinned_certificate(service: KeyService) -> None:
    other = KeyService(handler)
    try:
        spec = {**service.client_spec(), "cert": other.client_spec()["cert"]}  # not this service's cert
        with pytest.raises((ssl.SSLError, PipelineError)):
            KeyServiceClient(spec).call("echo", subjects=[])
    finally:
        other.close()


def test_plaintext_connections_get_nothing(service: KeyService) -> None:
    with socket.create_connection(service.address, timeout=5) as raw:
        raw.sendall(b"\x00\x00\x00\x02{}")
        raw.settimeout(5)
        try:
            data = raw.recv(100)
        except (ConnectionResetError, TimeoutError):
            data = b""
    assert b"ok" not in data
