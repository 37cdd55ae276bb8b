"""Usage errors of the operability options: --metrics-port, erasure status --fail-on, audit watch --check-erasures."""

from __future__ import annotations

import pytest

from strongroom.cli import main as cli_main


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["encrypt", "--topic", "t", "--local-kms", "ring.json", "--metrics-port", "70000"], "--metrics-port"),
        (["decrypt", "--topic", "t", "--local-kms", "ring.json", "--metrics-port", "-1"], "--metrics-port"),
        (["erasure", "status", "--all", "--fail-on", "late"], "--fail-on"),
        (["audit", "watch", "--check-erasures", "--erasure-interval", "soon"], "--erasure-interval"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_the_option(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(argv) == 2
    assert named in capsys.readouterr().err
