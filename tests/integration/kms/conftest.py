"""Fixtures of the KMS contract suite: one ``provider`` fixture, parametrised over every provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kms_providers import ProviderUnderTest, make_provider


@pytest.fixture(
    params=[
        pytest.param("local"),
        pytest.param("vault", marks=pytest.mark.integration),
        pytest.param("aws", marks=pytest.mark.integration),
    ]
)
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProviderUnderTest]:
    under_test = make_provider(request.param, request, tmp_path)
    try:
        yield under_test
    finally:
        under_test.kms.close()
        under_test.admin.close()
