"""A pipeline's checkpoint records its app id (its transactional ids and offsets group are named after it). A file
damaged by a crash while it was written is a clear stop asking for the app id, never a guess and never a trace."""

from __future__ import annotations

import pytest

from strongroom.errors import PipelineError
from strongroom.spark.jobs.progress import recorded_app_id


def test_the_recorded_app_id_is_read_and_an_absent_or_empty_file_records_none() -> None:
    assert recorded_app_id('{"app_id": "encrypt-orders", "kind": "encrypt"}', "/ck", None) == "encrypt-orders"
    assert recorded_app_id(None, "/ck", None) is None
    assert recorded_app_id("", "/ck", None) is None


@pytest.mark.parametrize(
    "damaged", ['{"app_id": "encr', "\ufffd", "[1, 2]", '{"app_id": 7}', '{"kind": "encrypt"}', "[" * 100_000]
)
def test_a_damaged_file_stops_the_pipeline_until_its_app_id_is_given(damaged: str) -> None:
    with pytest.raises(PipelineError) as err:
        recorded_app_id(damaged, "/ck", None)
    assert err.value.problem == (
        "the checkpoint /ck has a damaged strongroom-app.json (it no longer says which pipeline it belongs to)"
    )
    assert "--app-id" in err.value.hint
    assert recorded_app_id(damaged, "/ck", "encrypt-orders") is None  # the given id is used and recorded again
