"""The erasure feed: what an executor that saw generation g must forget, or that it must forget everything."""

from __future__ import annotations

from strongroom.keys.erasure_feed import ErasureDelta, ErasureFeed, ErasureNotice

A, B, C = b"a" * 16, b"b" * 16, b"c" * 16


def test_key_ids_erased_after_a_generation() -> None:
    feed = ErasureFeed()
    assert feed.since(None) == ErasureDelta(0)
    feed(ErasureNotice((A,), ("alice",)))
    feed(ErasureNotice())  # nothing erased: no new generation
    feed(ErasureNotice((B, C)))
    assert feed.generation == 2
    assert feed.since(0) == ErasureDelta(2, (A, B, C))
    assert feed.since(1) == ErasureDelta(2, (B, C))
    assert feed.since(2) == ErasureDelta(2)
    assert feed.since(None) == ErasureDelta(2)  # a newcomer holds nothing of this feed yet


def test_what_cannot_be_listed_is_a_reset() -> None:
    feed = ErasureFeed(max_keys=2)
    feed(ErasureNotice((A,)))
    feed(ErasureNotice((B, C)))  # A is trimmed: a consumer at generation 0 missed it
    assert feed.since(0).reset
    assert feed.since(1) == ErasureDelta(2, (B, C))
    feed(ErasureNotice(everything=True))  # a lost marker: keys dropped by wrapping key
    assert feed.since(2) == ErasureDelta(3, reset=True)
    assert feed.since(3) == ErasureDelta(3)
    assert feed.since(99).reset  # a generation this feed never gave out
