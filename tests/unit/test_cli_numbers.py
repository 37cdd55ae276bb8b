"""Every number of seconds (or other float) a command takes is finite: click's ranges let ``nan`` through any
bounds and ``inf`` through a range without a maximum, which then reached Spark triggers and client timeouts."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from strongroom.cli.common import FiniteFloatRange
from strongroom.cli.main import cli, main


def commands(group: click.Group, ctx: click.Context, path: str = "strongroom") -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield f"{path} {name}", command
        if isinstance(command, click.Group):
            yield from commands(command, click.Context(command, parent=ctx), f"{path} {name}")


def float_options() -> list[tuple[str, click.Parameter]]:
    ctx = click.Context(cli)
    return [
        (f"{where} {param.opts[0]}", param)
        for where, command in commands(cli, ctx)
        for param in command.params
        if isinstance(param.type, click.types.FloatParamType)
    ]


def test_the_commands_take_floats_and_every_one_must_be_finite() -> None:
    found = float_options()
    assert len(found) >= 12, [name for name, _ in found]
    not_finite = [name for name, param in found if not isinstance(param.type, FiniteFloatRange)]
    assert not_finite == [], "a float option that accepts nan/inf"


@pytest.mark.parametrize("value", ["nan", "inf", "-nan", "1e400"])
def test_nan_and_infinity_are_usage_errors_naming_the_value(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = {}
    for where, param in float_options():
        try:
            outcomes[where] = f"took {param.type.convert(value, param, None)}"
        except click.BadParameter as refused:
            outcomes[where] = str(refused)
    refused = [o for o in outcomes.values() if f"{value!r} is not a finite number" in o or "not in the range" in o]
    assert len(refused) == len(outcomes), outcomes
    code = main(["encrypt", "--topic", "t", "--continuous", "--trigger-seconds", value, "-b", "127.0.0.1:1"])
    assert code == 2
    assert "Invalid value for '--trigger-seconds'" in capsys.readouterr().err


def test_finite_values_in_range_still_convert() -> None:
    param = click.Option(["--seconds"], type=FiniteFloatRange(0.1, 600))
    assert param.type.convert("2.5", param, None) == 2.5
    with pytest.raises(click.BadParameter, match="not in the range"):
        param.type.convert("0", param, None)


@pytest.mark.parametrize(
    "argv",
    [
        ["encrypt", "--topic", "t", "--max-offsets-per-trigger", str(2**63), "-b", "127.0.0.1:1"],
        ["audit", "scrub", "--max-records-per-range", str(2**63)],
    ],
)
def test_counts_a_jvm_takes_are_bounded_by_a_java_long(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "is not in the range 1<=x<=9223372036854775807" in capsys.readouterr().err
