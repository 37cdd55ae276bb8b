"""The registry client: settings that validate themselves, and an outage waited out, never guessed."""

from __future__ import annotations

import logging

import pytest
from schema_kit import UNREACHABLE

from strongroom.schemas.errors import RegistryUnavailable
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
