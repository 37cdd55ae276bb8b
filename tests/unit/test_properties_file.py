"""Client properties files are read as Kafka's tools read them (java.util.Properties, values trimmed), and what
would silently hide a mistake is refused with its line number, never the line's text (it may hold a password)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strongroom.cli.main import main
from strongroom.kafka.properties import PropertiesFileError, parse_properties, read_properties_file

SECRET = "hunter2-SECRET-never-printed"


def test_every_separator_continuation_and_escape_reads_as_java_reads_it() -> None:
    text = (
        "# comment\n  ! another, indented\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism: SCRAM-SHA-512\n"
        "sasl.username alice\n"
        "  ssl.ca.location   =   /etc/ca.pem   \n"
        "sasl.password=one\\\n     two\\\\\n"  # a continuation, then an escaped backslash ending the value
        "client.id=a\\=b\\:c\\u00e9\\ud83d\\ude00\\tx\r\n"
        "ssl.endpoint.identification.algorithm=\n"
        "group.instance.id:\n"
        "# a comment ending in a backslash does not continue \\\n"
        "linger.ms=5"
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "ssl.ca.location": "/etc/ca.pem",
        "sasl.password": "onetwo\\",
        "client.id": "a=b:c\u00e9\U0001f600\tx",
        "ssl.endpoint.identification.algorithm": "",
        "group.instance.id": "",
        "linger.ms": "5",
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"security.protocol=SASL_SSL\nsasl.password={SECRET}\nsecurity.protocol=PLAINTEXT\n",
         "'security.protocol' is set on line 1 and again on line 3"),
        (f"acks=all\n{SECRET}\n", "line 2 holds a single word and no value"),
        (f"acks=all\n{SECRET}   \n", "line 2 holds a single word and no value"),
        (f"sasl.password/{SECRET}=x\n", "line 1 does not start with a property name"),
        (f"sasl.password={SECRET}\\u12g4\n", "line 1 has a malformed \\uXXXX escape"),
        (f"sasl.password={SECRET}\\ud83d\n", "line 1 has a \\uXXXX escape that is half of a character"),
    ],
)  # fmt: skip
def test_what_would_hide_a_mistake_is_refused_by_line_number_never_by_text(text: str, problem: str) -> None:
    with pytest.raises(PropertiesFileError) as err:
        parse_properties(text, source="client.properties")
    assert err.value.problem.startswith(f"client.properties: {problem}")
    assert SECRET[:10] not in str(err.value)


COMMANDS = [
    ["doctor", "client", "--config"],
    ["doctor", "-b", "127.0.0.1:1", "--command-config"],
    ["keys", "create-topic", "-b", "127.0.0.1:1", "--command-config"],
]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_commands_name_the_line_and_never_print_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"bootstrap.servers=127.0.0.1:1\nsasl.password {SECRET}\nsasl.password={SECRET}\n")
    code = main(["--output", "json", *command, str(path)])
    captured = capsys.readouterr()
    assert code != 0
    assert "'sasl.password' is set on line 2 and again on line 3" in captured.err + captured.out
    assert SECRET[:10] not in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out


def test_a_password_separated_by_a_space_is_a_password_not_an_unknown_property(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"bootstrap.servers=127.0.0.1:1\nsecurity.protocol SASL_SSL\nsasl.mechanism PLAIN\n"
                    f"sasl.username alice\nsasl.password {SECRET}\n")  # fmt: skip
    assert read_properties_file(str(path))["sasl.password"] == SECRET
    main(["--output", "json", "doctor", "client", "--config", str(path)])
    captured = capsys.readouterr()
    assert "client-unknown-property" not in {finding["rule"] for finding in json.loads(captured.out)["findings"]}
    assert SECRET[:10] not in captured.err + captured.out


def test_a_byte_order_mark_is_not_part_of_the_first_name(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_bytes("\ufeffsecurity.protocol=SASL_SSL\r\nsasl.mechanism=PLAIN\r\n".encode())
    assert read_properties_file(str(path)) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
