"""The driver's key service: TLS with a pinned certificate, a token on every request, clear errors."""

from __future__ import annotations

import json
import socket
import ssl
import time
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


# ------------------------------------------------------------------ denial of service (issue 11)
def tls_to(service: KeyService) -> ssl.SSLSocket:
    """A raw TLS connection that trusts the service's certificate (what an attacker on the network can open)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=service.client_spec()["cert"])
    raw = socket.create_connection(service.address, timeout=10)
    return context.wrap_socket(raw, server_hostname=service.host)


def answer(conn: ssl.SSLSocket) -> dict[str, Any]:
    size = int.from_bytes(conn.recv(4), "big")
    data = b""
    while len(data) < size:
        data += conn.recv(size - len(data))
    result: dict[str, Any] = json.loads(data)
    return result


def closed(conn: ssl.SSLSocket, within: float) -> bool:
    conn.settimeout(within)
    try:
        return conn.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError, OSError):
        return True


@pytest.fixture
def strict_service() -> Any:
    svc = KeyService(handler, auth_timeout_s=1.0, max_connections=3)
    yield svc
    svc.close()


def test_a_silent_connection_is_dropped_after_the_auth_timeout(strict_service: KeyService) -> None:
    with tls_to(strict_service) as conn:
        started = time.monotonic()
        assert closed(conn, within=10)
        assert time.monotonic() - started < 5
    with socket.create_connection(strict_service.address, timeout=10) as raw:  # not even a TLS handshake
        started = time.monotonic()
        raw.settimeout(10)
        assert raw.recv(1) == b""
        assert time.monotonic() - started < 5


def test_nothing_large_is_read_before_the_token_matched(strict_service: KeyService) -> None:
    with tls_to(strict_service) as conn:
        conn.sendall((512 * 1024 * 1024).to_bytes(4, "big"))  # announces half a gigabyte, sends nothing more
        reply = answer(conn)
        assert reply["ok"] is False
        assert "authentication frame refused" in reply["error"]["problem"]
        assert closed(conn, within=5)


def test_a_wrong_or_non_ascii_token_gets_an_error_not_an_exception(strict_service: KeyService) -> None:
    for token in ("0" * 64, "é" * 32, ""):
        with tls_to(strict_service) as conn:
            body = token.encode("utf-8")
            conn.sendall(len(body).to_bytes(4, "big") + body)
            reply = answer(conn)
            assert reply["ok"] is False
            expected = "not ASCII" if not token.isascii() else "unauthenticated"
            assert expected in reply["error"]["problem"]
            assert closed(conn, within=5)
    # the service still serves honest clients
    assert KeyServiceClient(strict_service.client_spec()).call("echo", subjects=["x"])["subjects"] == ["x"]


def test_connections_beyond_the_cap_are_closed_on_arrival(strict_service: KeyService) -> None:
    spec = strict_service.client_spec()
    holders = []
    for _ in range(3):  # three authenticated, idle connections fill the service
        conn = tls_to(strict_service)
        conn.sendall(len(spec["token"]).to_bytes(4, "big") + spec["token"].encode())
        assert answer(conn) == {"ok": True}
        holders.append(conn)
    try:
        with socket.create_connection(strict_service.address, timeout=10) as extra:
            extra.settimeout(5)
            assert extra.recv(1) == b""  # closed at once, before any TLS
    finally:
        for conn in holders:
            conn.close()
    time.sleep(0.5)
    assert KeyServiceClient(spec).call("echo", subjects=[])["subjects"] == []


def test_a_packed_encrypt_answer_holds_every_asked_subject_in_request_order() -> None:
    from strongroom.spark.keyservice import packed_encrypt_answer

    key_a, key_b = (bytes([1]) * 16, bytes([2]) * 32), (bytes([3]) * 16, bytes([4]) * 32)
    keys = {"a": (*key_a, True), "b": (*key_b, True), "gone": (bytes(16), bytes(32), False)}
    packed = unb64(packed_encrypt_answer(["b", "gone", "a", "b"], keys)["keys"])
    assert packed == b"".join([b"\x01" + key_b[0] + key_b[1], bytes(49), b"\x01" + key_a[0] + key_a[1],
                               b"\x01" + key_b[0] + key_b[1]])  # fmt: skip
    with pytest.raises(PipelineError, match="cannot be packed"):
        packed_encrypt_answer(["a"], {"a": (bytes(8), bytes(32), True)})


def test_a_packed_decrypt_answer_holds_a_state_per_pair_and_the_available_keys() -> None:
    from strongroom.spark.keyservice import KEY_STATE_CODES, packed_decrypt_answer

    dek_1, dek_2 = bytes([7]) * 32, bytes([8]) * 32
    rows = [
        (b"k1", dek_1, "available", None), (b"k2", None, "erased", None), (b"k3", None, "lost", "KEK gone"),
        (b"k4", dek_2, "available", None), (b"k5", None, "foreign", "not theirs"), (b"k6", None, "pending", None),
    ]  # fmt: skip
    answer = packed_decrypt_answer(rows)
    assert list(unb64(answer["states"])) == [KEY_STATE_CODES[r[2]] for r in rows]
    assert unb64(answer["deks"]) == dek_1 + dek_2
    assert answer["reasons"] == {"2": "KEK gone", "4": "not theirs"}
    with pytest.raises(KeyError):
        packed_decrypt_answer([(b"k", None, "unheard-of", None)])
