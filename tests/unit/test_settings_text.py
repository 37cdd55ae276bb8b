"""Settings files (rules, KMS settings, a KEK file) are read by one strict parser: a key given twice, nesting
too deep, or YAML aliases that expand into a huge document or into themselves get a clear error naming the
place, never a guess, a hang or an internal error, and never the secret beside them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strongroom.cli.main import main
from strongroom.errors import ConfigError
from strongroom.kms.catalog import KmsCatalog
from strongroom.kms.errors import KmsConfigError
from strongroom.rules import EncryptionRules
from strongroom.text import MAX_SETTINGS_DEPTH, MAX_SETTINGS_VALUES, parse_secret_text, problem_list

TOKEN = "hvs.SECRET-token-that-must-never-be-printed-42"


def refusal(text: str, *, yaml_syntax: bool) -> str:
    with pytest.raises(ValueError, match=r".") as err:  # the message itself is what each test checks
        parse_secret_text(text, yaml_syntax=yaml_syntax)
    return str(err.value)


@pytest.mark.parametrize(
    ("text", "yaml_syntax", "expected"),
    [
        ('{"rules": [{"topic": "a", "mode": "fields", "mode": "value"}]}', False,
         "the key 'mode' appears more than once in rules[0]"),
        ('{"provider": "vault", "token": "x", "provider": "local"}', False,
         "the key 'provider' appears more than once in the top-level object"),
        ("provider: vault\naddress: https://vault:8200\nprovider: local\n", True,
         "the key 'provider' appears more than once in a mapping at line 3 column 1"),
        ("rules:\n  - topic: a\n    on_reject: dead-letter\n    on_reject: fail\n", True,
         "the key 'on_reject' appears more than once in a mapping at line 4 column 5"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_refused_with_its_place(text: str, yaml_syntax: bool, expected: str) -> None:
    assert refusal(text, yaml_syntax=yaml_syntax) == expected


def test_a_repeated_key_that_could_be_a_pasted_secret_is_not_printed() -> None:
    pasted = ((f'{{"{TOKEN} x": 1, "{TOKEN} x": 2}}', False), (f"'{TOKEN} x': 1\n'{TOKEN} x': 2\n", True))
    for text, yaml_syntax in pasted:
        message = refusal(text, yaml_syntax=yaml_syntax)
        assert message.startswith("a key appears more than once")
        assert TOKEN[:12] not in message


def test_the_first_repeated_key_in_the_file_is_the_one_named() -> None:
    text = '{"a": {"x": 1, "x": 2}, "b": {"y": 1, "y": 2}}'
    assert refusal(text, yaml_syntax=False) == "the key 'x' appears more than once in a"
    pasted = f'{{"{TOKEN} x": {{"x": 1, "x": 2}}}}'  # the place is named without a key that could be a secret
    assert refusal(pasted, yaml_syntax=False) == "the key 'x' appears more than once in ?"


def test_keys_merged_from_an_anchor_may_be_overridden_and_anchors_still_work() -> None:
    text = (
        "defaults: &defaults\n  on_reject: dead-letter\n  subject: {source: key}\n"
        "rules:\n  - <<: *defaults\n    topic: a\n    on_reject: fail\n  - <<: *defaults\n    topic: b\n"
    )
    data = parse_secret_text(text, yaml_syntax=True)
    assert data["rules"][0] == {"on_reject": "fail", "subject": {"source": "key"}, "topic": "a"}
    assert data["rules"][1]["on_reject"] == "dead-letter"
    assert parse_secret_text("", yaml_syntax=True) is None  # an empty YAML file is what it was


def test_yaml_aliases_that_expand_beyond_the_bound_are_refused_before_anything_is_built() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10**9 values once expanded
    message = refusal("\n".join(lines) + "\n", yaml_syntax=True)
    assert message.startswith(f"holds more than {MAX_SETTINGS_VALUES} values once its aliases are followed at line ")


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    message = refusal("rules:\n  - &r\n    topic: a\n    fields: [*r]\n", yaml_syntax=True)
    assert message == "an alias refers to a node that contains it at line 2 column 5"


@pytest.mark.parametrize("levels", [MAX_SETTINGS_DEPTH + 1, 400, 100_000])
@pytest.mark.parametrize("yaml_syntax", [False, True])
def test_nesting_deeper_than_the_bound_is_refused_however_deep(levels: int, yaml_syntax: bool) -> None:
    text = "[" * levels + "]" * levels  # under a top-level key: the innermost list is ``levels`` deep
    assert refusal(f"a: {text}" if yaml_syntax else f'{{"a": {text}}}', yaml_syntax=yaml_syntax).startswith(
        f"nested more than {MAX_SETTINGS_DEPTH} levels deep"
    )


def test_nesting_and_size_within_the_bounds_parse() -> None:
    deep = "[" * MAX_SETTINGS_DEPTH + "]" * MAX_SETTINGS_DEPTH
    assert parse_secret_text(f'{{"a": {deep}}}', yaml_syntax=False) is not None
    assert parse_secret_text(f"a: {deep}", yaml_syntax=True) is not None
    many = json.dumps({"topics": [f"t{i}" for i in range(MAX_SETTINGS_VALUES - 2)]})
    assert len(parse_secret_text(many, yaml_syntax=False)["topics"]) == MAX_SETTINGS_VALUES - 2
    assert refusal(json.dumps({"topics": ["t"] * MAX_SETTINGS_VALUES}), yaml_syntax=False).startswith(
        f"more than {MAX_SETTINGS_VALUES} values"
    )


def test_every_settings_file_goes_through_the_strict_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - topic: a\n    topic: b\n")
    with pytest.raises(ConfigError, match=r"cannot parse rules file .*the key 'topic' appears more than once"):
        EncryptionRules.load(rules)
    kms = tmp_path / "kms.json"
    kms.write_text(f'{{"kms": {{"eu": {{"provider": "vault", "token": "{TOKEN}", "token": "{TOKEN}2"}}}}}}')
    with pytest.raises(KmsConfigError, match=r"the key 'token' appears more than once in kms\.eu") as err:
        KmsCatalog.load(kms)
    assert TOKEN[:12] not in str(err.value)
    kek_file = tmp_path / "keks.json"
    kek_file.write_text('{"4a1c": "AAAA", "4a1c": "BBBB"}')
    for argv in (
        ["encrypt", "-b", "127.0.0.1:1", "--kms-config", str(kms), "--topic", "t"],
        ["recover", "scan", "-b", "127.0.0.1:1", "--topic", "t", "--kms", "inmemory", "--kek-file", str(kek_file)],
    ):
        code = main(["--output", "json", *argv])
        captured = capsys.readouterr()
        assert code == 1, captured
        assert "appears more than once" in captured.err + captured.out
        assert "Traceback" not in captured.err + captured.out
        assert TOKEN[:12] not in captured.err + captured.out


def test_a_long_list_of_problems_is_cut_to_the_first_few() -> None:
    errors = [{"loc": ("rules", 0, "fields", i), "msg": "Input should be a valid string"} for i in range(40)]
    text = problem_list(errors)
    assert text.count("Input should be a valid string") == 8
    assert text.endswith("rules.0.fields.7: Input should be a valid string; and 32 more")
    assert problem_list([{"loc": (), "msg": "Value error, not a URL"}]) == "not a URL"


def test_a_settings_file_that_is_not_utf8_is_named_and_its_bytes_never_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's ``UnicodeDecodeError`` quotes the byte it stopped at; in these files that byte can be a
    token's. Every reader of them goes through one function that names the file and the offset only."""
    secret_byte = b"\xe9"  # 'é' in Latin-1: a token or key byte in a file saved in the wrong encoding
    rules = tmp_path / "rules.yaml"
    rules.write_bytes(b"kms:\n  eu: {provider: vault, token: hvs." + secret_byte + b"x}\nrules: []\n")
    kms = tmp_path / "kms.json"
    kms.write_bytes(b'{"provider": "vault", "token": "hvs.' + secret_byte + b'x"}')
    with pytest.raises(ConfigError) as rules_err:
        EncryptionRules.load(rules)
    with pytest.raises(KmsConfigError) as catalog_err:
        KmsCatalog.load(rules)
    for err, what in ((rules_err, "rules file"), (catalog_err, "KMS settings file")):
        assert f"{what} '{rules}' is not UTF-8 text (invalid at byte offset 40)" in str(err.value)
        assert "0xe9" not in str(err.value)
    for argv in (
        ["encrypt", "-b", "127.0.0.1:1", "--kms-config", str(kms), "--topic", "t"],
        ["encrypt", "-b", "127.0.0.1:1", "--rules", str(rules)],
    ):
        for output in ("text", "json"):
            code = main(["--output", output, *argv])
            captured = capsys.readouterr()
            assert code == 1, captured
            assert "is not UTF-8 text" in captured.err + captured.out
            assert "0xe9" not in captured.err + captured.out
            assert "Traceback" not in captured.err + captured.out
