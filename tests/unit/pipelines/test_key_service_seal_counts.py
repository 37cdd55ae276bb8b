"""The key service's ``seals`` argument: one count per subject, optional for older clients."""

from __future__ import annotations

import pytest

from strongroom.errors import PipelineError
from strongroom.spark.jobs.encrypt import seal_counts


def test_counts_align_with_subjects() -> None:
    assert seal_counts(["a", "b"], [3, 0]) == {"a": 3, "b": 0}


def test_a_client_without_counts_is_charged_one_seal_per_subject() -> None:
    assert seal_counts(["a", "b"], None) == {"a": 1, "b": 1}


@pytest.mark.parametrize("seals", [[1], [1, -1], [1, True], "12", [1, 2.0]])
def test_malformed_counts_are_refused_with_a_hint(seals: object) -> None:
    with pytest.raises(PipelineError, match="one non-negative count per subject") as caught:
        seal_counts(["a", "b"], seals)
    assert caught.value.hint
