"""The garbage collector paused while keys batches are built: off inside, as it was once the last pause ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from strongroom.runtime import CollectorPause, collector_paused


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    assert CollectorPause._pauses == 0
    if enabled:
        gc.enable()


def test_a_pause_turns_the_collector_off_and_back_on_even_when_the_batch_fails() -> None:
    gc.enable()
    with collector_paused:
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused:
        raise RuntimeError("a batch that fails")
    assert gc.isenabled()


def test_pauses_nest_and_the_last_one_out_restores() -> None:
    gc.enable()
    with collector_paused:
        with collector_paused:
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer batch is still running
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    with collector_paused:
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_pauses_from_two_threads_overlap_and_the_collector_is_on_after_both() -> None:
    gc.enable()
    inside, release = threading.Event(), threading.Event()

    def other_batch() -> None:
        with collector_paused:
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_batch)
    thread.start()
    assert inside.wait(10)
    with collector_paused:
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's batch still runs
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_batch_of_survivors_meets_no_collector_pass_while_paused() -> None:
    """What the pause is for: building 50,000 containers that all stay alive runs no pass at all (the
    collector would otherwise run one every 700 allocations), and the next pass after it still works."""
    gc.enable()
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with collector_paused:
            survivors = [[i] for i in range(50_000)]
            passes_while_paused = len(passes)
        assert passes_while_paused == 0
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # cyclic garbage is still found once the pause is over
    finally:
        gc.callbacks.remove(count)
    assert len(survivors) == 50_000
