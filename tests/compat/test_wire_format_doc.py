"""docs/wire-format.md is executable: its registry table and worked example must match the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

from strongroom.envelope import ids

DOC = Path(__file__).parents[2] / "docs" / "wire-format.md"
VECTOR = Path(__file__).parent / "vectors" / "whole-value-subject-key-topic.json"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _code_blocks(section: str) -> list[str]:
    return re.findall(r"```\n(.*?)```", section, flags=re.S)


def _hex_of(block: str) -> str:
    """The leading hex tokens of each line (comments and quoted text after them are ignored)."""
    out = []
    for line in block.splitlines():
        for token in line.split():
            if re.fullmatch(r"[0-9a-f]+", token):
                out.append(token)
            else:
                break
    return "".join(out)


def test_registry_table_matches_ids_module() -> None:
    table = _section("## 7. Id registry")
    rows = {
        (registry.strip(), ident.strip().strip("`"))
        for registry, ident in re.findall(r"^\| ([^|]+) \| (`[^`]+`) \|", table, flags=re.M)
    }
    expected = {("value mode", f"0x{m.value:02x}") for m in ids.ValueMode}
    expected |= {("format version", f"0x{v.value:02x}") for v in ids.FormatVersion}
    expected |= {("cipher", f"0x{c.value:02x}") for c in ids.Cipher}
    expected |= {("cipher", f"0x{c:02x}") for c in ids.RESERVED_CIPHER_IDS}
    expected |= {("key-ref kind", f"0x{k.value:02x}") for k in ids.KeyRefKind}
    expected |= {("AAD profile", f"0x{p.value:02x}") for p in ids.AadProfile}
    expected |= {("magic", f"0x{ids.MAGIC:02X}"), ("field prefix", ids.FIELD_PREFIX)}
    expected |= {("AAD label", ids.AAD_LABEL.decode())}
    assert rows == expected


def test_worked_example_matches_the_frozen_vector() -> None:
    vector = json.loads(VECTOR.read_text())
    blocks = _code_blocks(_section("## 9. Worked example"))
    envelope, aad = _hex_of(blocks[0]), _hex_of(blocks[1])
    assert envelope == vector["envelope_hex"]
    assert aad == vector["aad_hex"]
    section = _section("## 9. Worked example")
    assert f"Envelope ({len(envelope) // 2} bytes)" in section
    assert f"AAD ({len(aad) // 2} bytes)" in section


def test_json_field_example_matches_its_vector() -> None:
    vector = json.loads((VECTOR.parent / "json-fields-subject-key-topic.json").read_text())
    out_line = next(line for line in _code_blocks(_section("## 9. Worked example"))[2].splitlines() if "out:" in line)
    assert vector["sealed_value_utf8"].startswith(out_line.split("out: ", 1)[1].rstrip(".").rstrip(","))
