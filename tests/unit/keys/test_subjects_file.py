"""``erase --from-file``: every subject exactly as written. A subject id is matched byte for byte, so a file line
trimmed into another id would erase the wrong person while the one asked for stays readable."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.cli.main import main
from strongroom.errors import ConfigError
from strongroom.keys.erasure import read_subjects_file


def subjects_in(tmp_path: Path, content: bytes) -> list[str]:
    path = tmp_path / "requests.txt"
    path.write_bytes(content)
    return read_subjects_file(str(path))


def test_lines_are_subjects_exactly_comments_and_blank_lines_skipped(tmp_path: Path) -> None:
    content = "\ufeff# from the ticket system\r\nann\r\n\r\n  # indented comment\n \t\nben-42\u2028x\nc#at\n\n".encode()
    assert subjects_in(tmp_path, content) == ["ann", "ben-42\u2028x", "c#at"]  # a BOM, CRLF; U+2028 is no line end


def test_a_json_string_line_holds_any_id(tmp_path: Path) -> None:
    content = b'" bob"\n"#42"\n"\\"quoted\\""\n"tab\\there" \n'
    assert subjects_in(tmp_path, content) == [" bob", "#42", '"quoted"', "tab\there"]


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        (b"ann\n bob\n", 2, "spaces or tabs around it"),
        (b"ann\nbob \n", 2, "spaces or tabs around it"),
        (b"bob\t\n", 1, "spaces or tabs around it"),
        (b'ann\n"bob\n', 2, "must be one JSON string"),
        (b'"bob" "ann"\n', 1, "must be one JSON string"),
    ],
)
def test_a_line_whose_id_would_be_a_guess_is_refused_by_number(
    tmp_path: Path, content: bytes, line: int, problem: str
) -> None:
    with pytest.raises(ConfigError, match=rf"line {line}: .*{problem}") as err:
        subjects_in(tmp_path, content)
    assert err.value.hint


def test_a_file_that_is_not_utf8_is_named_with_the_offset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(invalid at byte offset 4\)") as err:
        subjects_in(tmp_path, b"ann\n\xe9ric\n")
    assert "0xe9" not in str(err.value)


def test_erase_refuses_the_file_before_it_connects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    requests = tmp_path / "requests.txt"
    requests.write_text("ann\nbob \n")
    argv = ["--output", "json", "erase", "-b", "127.0.0.1:1", "--reason", "art. 17", "--from-file", str(requests)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "line 2: the subject has spaces or tabs around it" in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out
