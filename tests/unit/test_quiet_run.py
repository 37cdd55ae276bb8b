"""``make demo`` runs the demo through ``quiet_run``: a raw librdkafka line or a deprecation banner fails it."""

from __future__ import annotations

import sys

import pytest

from strongroom.testing.quiet_run import offending_lines, run_quietly


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_clean_output_passes_through_and_succeeds(capfd: pytest.CaptureFixture[str]) -> None:
    assert run_quietly(child("print('chapter 1'); import sys; print('to stderr', file=sys.stderr)")) == 0
    out = capfd.readouterr().out
    assert "chapter 1" in out
    assert "to stderr" in out


@pytest.mark.parametrize(
    "line",
    ["%3|1700000000.123|FAIL|rdkafka#producer-1| [thrd:127.0.0.1:9092/bootstrap]: Connection refused",
     "DeprecationWarning: datetime.utcnow() is deprecated"],
)  # fmt: skip
def test_an_offending_line_on_either_stream_fails_the_run_and_is_listed(
    line: str, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run_quietly(child(f"import os; os.write(2, {(line + chr(10)).encode()!r})")) == 3  # as librdkafka: the fd
    captured = capfd.readouterr()
    assert line in captured.out
    assert "must never reach a user's terminal" in captured.err
    assert line in captured.err


def test_a_failing_command_keeps_its_exit_code(capfd: pytest.CaptureFixture[str]) -> None:
    assert run_quietly(child("import sys; print('%3|x|FAIL|y'); sys.exit(5)")) == 5


def test_only_whole_offending_lines_count() -> None:
    assert offending_lines("ok\n%4|1|GETPID|x\nnot %3| at the start\n") == ["%4|1|GETPID|x"]


def test_a_python_child_writes_unbuffered_so_its_lines_arrive_as_they_are_printed(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert run_quietly(child("import os; print('unbuffered:', os.environ.get('PYTHONUNBUFFERED'))")) == 0
    assert "unbuffered: 1\n" in capfd.readouterr().out
