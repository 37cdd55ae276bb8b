"""A pipeline driver's garbage collector: cheap while the job holds its heap, as before once it is closed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from strongroom.runtime import LARGE_HEAP_GC_THRESHOLDS, LargeHeapCollector


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    while LargeHeapCollector._holders:
        LargeHeapCollector._release()
    gc.set_threshold(*before)
    gc.unfreeze()


def test_a_hold_raises_the_thresholds_and_freezes_what_is_alive_then_a_release_undoes_both() -> None:
    gc.set_threshold(700, 10, 10)
    alive = [object() for _ in range(10)]
    hold = LargeHeapCollector.hold()
    assert gc.get_threshold() == LARGE_HEAP_GC_THRESHOLDS
    assert gc.get_freeze_count() > 0
    hold.release()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    assert alive


def test_holds_nest_the_last_release_restores() -> None:
    gc.set_threshold(700, 10, 10)
    first, second = LargeHeapCollector.hold(), LargeHeapCollector.hold()
    first.release()
    first.release()  # a second release of the same hold changes nothing
    assert gc.get_threshold() == LARGE_HEAP_GC_THRESHOLDS, "another job still holds its heap"
    second.release()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_higher_thresholds_an_application_chose_are_kept() -> None:
    gc.set_threshold(100_000, 50, 200)
    hold = LargeHeapCollector.hold()
    assert gc.get_threshold() == (100_000, 50, 200)
    hold.release()
    assert gc.get_threshold() == (100_000, 50, 200)


def test_garbage_cycles_of_before_the_hold_are_not_frozen_for_good() -> None:
    class Node:
        other: object

    def cycle() -> weakref.ref[Node]:
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    gc.disable()
    try:
        node = cycle()
        assert node() is not None, "only the collector frees a cycle"
        LargeHeapCollector.hold()  # collects first: the cycle is freed, not frozen
        assert node() is None
    finally:
        gc.enable()
