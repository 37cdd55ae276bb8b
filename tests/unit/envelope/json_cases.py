"""JSON texts the field-mode tests share: well-formed documents (hypothesis) and hostile texts (a seeded
generator of pieces an attacker would try: duplicate and escaped names, lone surrogates, non-canonical numbers,
envelopes that only look sealed, broken UTF-8)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st


def json_trees(names: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers beyond 64 bits, every finite double, any text, and lists and
    objects of those, with member names drawn from ``names``."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(names, children, max_size=5),
        max_leaves=20,
    )


#: Values whose member names are often the rules' own, or look sealed, or need escapes.
json_values = json_trees(
    st.sampled_from(["name", "email", "address", "é x", "a", "\u0000", '"', "sr1:"]) | st.text(max_size=4)
)
documents = st.dictionaries(st.sampled_from(["name", "email", "address", "é x", "n", "m"]), json_values, max_size=6)


HOSTILE_PIECES = [
    "{", "}", "[", "]", ",", ":", '"a"', '"name"', '"\\u006eame"', '"sr1:QUJD"', '"\\u0073r1:QUJD"', '"\\ud83d\\ude00"',
    '"\\ud800"', '"\\udc00x"', '"\\ud800\\u0041"', '"\\/"', '"\\b\\u0008\\u001F"', "1", "-0", "-0.0", "1e5", "1E+2",
    "0.1", "1.", "01", "-", "1e400", "-1e400", "1e-400", "12345678901234567890123", "true", "false", "null", "NaN",
    "Infinity", "-Infinity", " ", "\n", "\t", "\x0b", '"\x01"', '"\x7f"', '"\xc3\xa9"', '"\xed\xa0\x80"', '"\xe2\x82"',
    '"\xf4\x90\x80\x80"', '"\xc0\xaf"', '"\xe0\x80\xaf"', "x", '"\\x"', '"\\u00e9"', '"\\u00E9"', "2.50", "3.0e-7",
    '"\\""', '"\\\\"', "\ufeff", "\u00a0",
]  # fmt: skip


def hostile_text(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return rng.choice(HOSTILE_PIECES)
    if roll < 0.65:
        names = ['"name"', '"email"', '"\\u0065mail"', '"é x"', '"\\u00e9 x"', '"sr1:x"', '"a"']
        members = [
            rng.choice(names) + rng.choice([":", " : "]) + hostile_text(rng, depth + 1)
            for _ in range(rng.randint(0, 4))
        ]
        text = "{" + rng.choice([",", ", "]).join(members) + "}"
    else:
        text = "[" + ",".join(hostile_text(rng, depth + 1) for _ in range(rng.randint(0, 4))) + "]"
    if rng.random() < 0.08:
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(HOSTILE_PIECES) + text[at:]
    return text


def hostile_bytes(rng: random.Random) -> bytes:
    """A hostile text as UTF-8, or (about one in seven) as Latin-1 with what it cannot hold replaced: bytes that are
    not UTF-8."""
    text = hostile_text(rng)
    return text.encode("latin-1", "replace") if rng.random() < 0.15 else text.encode("utf-8")


def integers_in(value: Any) -> list[int]:
    """The integers a decoded document holds (the native reader leaves those of 19 digits or more to Python)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict):
        return [i for v in value.values() for i in integers_in(v)]
    if isinstance(value, list):
        return [i for v in value for i in integers_in(v)]
    return []
