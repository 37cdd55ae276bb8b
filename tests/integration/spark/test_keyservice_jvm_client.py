"""The Java key-service client (``io.strongroom.dataplane.keys``) against the driver's real key service.

The service is ``strongroom.spark.keyservice.KeyService`` with a small handler; the client runs in a JVM
from the data-plane jar (``KeyServiceTool``, spec and token on stdin). Pinned TLS, the token frame, JSON
requests, service errors and large responses behave as for the Python client.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from strongroom.errors import PipelineError
from strongroom.spark.dataplane import runtime_classpath
from strongroom.spark.keyservice import KeyService, KeyServiceClient

pytestmark = pytest.mark.integration


def _handler(op: str, args: dict[str, Any]) -> Any:
    if op == "echo":
        return args
    if op == "big":
        return {"blob": "k" * int(args["size"])}
    raise PipelineError(f"unknown op {op!r}", hint="ask for echo or big")


@pytest.fixture
def service() -> Iterator[KeyService]:
    started = KeyService(_handler)
    try:
        yield started
    finally:
        started.close()


def _java(spec: dict[str, Any], requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    java = shutil.which("java")
    assert java, "java is not on PATH"
    done = subprocess.run(
        [
            java,
            "-cp",
            runtime_classpath(),
            "io.strongroom.dataplane.tools.KeyServiceTool",
        ],
        input=json.dumps({"spec": spec, "requests": requests}).encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def test_the_java_client_gets_the_same_answers_as_the_python_client(service: KeyService) -> None:
    requests = [
        {"op": "echo", "args": {"subjects": ["alice", "bob", "名前"], "n": 3}},
        {"op": "big", "args": {"size": 5_000_000}},
        {"op": "nope", "args": {}},
        {"op": "echo", "args": {"after": "an error the connection stays usable"}},
    ]
    python = KeyServiceClient(service.client_spec())
    expected: list[dict[str, Any]] = []
    for request in requests:
        try:
            expected.append({"ok": True, "result": python.call(request["op"], **request["args"])})
        except PipelineError as exc:
            expected.append({"ok": False, "problem": exc.problem, "hint": exc.hint})
    assert _java(service.client_spec(), requests) == expected
    assert expected[2] == {"ok": False, "problem": "unknown op 'nope'", "hint": "ask for echo or big"}


def test_a_wrong_token_is_refused(service: KeyService) -> None:
    spec = service.client_spec() | {"token": "0" * 64}
    [answer] = _java(spec, [{"op": "echo", "args": {}}])
    assert answer["ok"] is False
    assert answer["problem"] == "unauthenticated request"
    assert service.token not in json.dumps(answer)


def test_only_the_pinned_certificate_is_trusted(service: KeyService) -> None:
    other = KeyService(_handler)
    try:
        spec = service.client_spec() | {"cert": other.client_spec()["cert"]}
    finally:
        other.close()
    [answer] = _java(spec, [{"op": "echo", "args": {}}])
    assert answer["ok"] is False
    assert answer["problem"].startswith(f"cannot reach the driver's key service at 127.0.0.1:{service.port}")
    assert "SSLHandshakeException" in answer["problem"]
    assert service.token not in json.dumps(answer)


def test_a_host_name_that_the_certificate_does_not_name_is_refused(service: KeyService) -> None:
    spec = service.client_spec() | {"host": "localhost"}  # the certificate names 127.0.0.1 only
    [answer] = _java(spec, [{"op": "echo", "args": {}}])
    assert answer["ok"] is False
    assert "SSLHandshakeException" in answer["problem"]


def test_a_connection_the_service_closed_is_reopened_once() -> None:
    """The service drops a connection after its idle timeout; the next request reconnects and succeeds."""
    idle = KeyService(_handler, idle_timeout_s=0.5)
    try:
        answers = _java(
            idle.client_spec(),
            [{"op": "echo", "args": {"n": 1}}, {"op": "echo", "args": {"n": 2}, "pause_ms": 2000}],
        )
    finally:
        idle.close()
    assert answers == [{"ok": True, "result": {"n": 1}}, {"ok": True, "result": {"n": 2}}]


def test_an_unreachable_service_names_the_address() -> None:
    gone = KeyService(_handler)
    spec = gone.client_spec()
    gone.close()
    [answer] = _java(spec, [{"op": "echo", "args": {}}])
    assert answer["ok"] is False
    assert answer["problem"].startswith(f"cannot reach the driver's key service at 127.0.0.1:{spec['port']}")
    assert answer["hint"] == "executors must reach the driver host (as for Spark's own driver endpoints)"
