"""The registry client: settings that validate themselves, and an outage waited out, never guessed."""

from __future__ import annotations

import http.server
import logging
import threading

import pytest
from schema_kit import UNREACHABLE

from strongroom.schemas.errors import RegistryUnavailable, SchemaRegistryError
from strongroom.schemas.registry import RegisteredSchema, RegistrySettings, SchemaRegistry


class FakeTime:
    """The client's clock and sleep (injected): sleeping moves the clock, so the test takes no time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_an_unreachable_registry_is_waited_for_then_named(caplog: pytest.LogCaptureFixture) -> None:
    time = FakeTime()
    settings = RegistrySettings(url=UNREACHABLE, username="svc", password="hunter2", outage_wait_s=20)
    registry = SchemaRegistry(settings, sleep=time.sleep, clock=time.clock)
    with caplog.at_level(logging.WARNING), pytest.raises(RegistryUnavailable) as caught:
        registry.schema(1)
    assert "http://127.0.0.1:9/apis/ccompat/v7 unreachable for 20s while reading schema id 1" in caught.value.problem
    assert len(time.sleeps) >= 4
    assert sum(time.sleeps) == pytest.approx(20)
    assert time.sleeps[1] > time.sleeps[0] / 2, "backs off"
    assert all("unreachable" in r.getMessage() for r in caplog.records)
    assert "hunter2" not in caplog.text
    assert "hunter2" not in str(caught.value)


def test_a_preloaded_schema_is_never_fetched() -> None:
    registry = SchemaRegistry(UNREACHABLE)
    registry.preload(3, RegisteredSchema("AVRO", '"string"'))
    assert registry.schema(3).text == '"string"'
    assert registry.requests == 0


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"url": "ftp://x"}, "must be http"),
        ({"url": "http://u:p@host:8081"}, "not in the URL"),
        ({"url": "http://host", "username": "u"}, "both username and password"),
        ({"url": "http://host", "username": "u", "password": "p", "bearer_token": "t"}, "not both"),
    ],
)
def test_settings_refuse_what_cannot_work(settings: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RegistrySettings.model_validate(settings)


class HostileRegistry(http.server.BaseHTTPRequestHandler):
    """A server at the registry's URL answering every request with JSON nested a hundred thousand levels deep."""

    def do_GET(self) -> None:
        body = b"[" * 100_000 + b"]" * 100_000
        self.send_response(200 if "/schemas/ids/1" in self.path else 422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_an_answer_nested_too_deep_is_a_clear_registry_error_not_an_internal_one() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HostileRegistry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        registry = SchemaRegistry(f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(SchemaRegistryError, match="answered schema id 1 with something that is not JSON"):
            registry.schema(1)
        with pytest.raises(SchemaRegistryError, match=r"answered schema id 2 with HTTP 422"):
            registry.schema(2)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
