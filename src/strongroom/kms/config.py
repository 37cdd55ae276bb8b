"""Shared pieces of the provider configuration models (pydantic v2 / pydantic-settings).

Every provider config validates itself on construction. Validation messages are rebuilt from the
error locations and reasons only: pydantic's own text echoes the offending input, which for a
token or secret key would put the secret into a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from strongroom.kms.errors import KmsConfigError

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class ProviderConfig(BaseSettings):
    """Base of provider configs: unknown keys are errors, values may also come from the environment."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    #: Provider name written into EDEKs and envelope KEK references.
    name: str


def validate_config(model: type[ConfigT], values: Mapping[str, Any]) -> ConfigT:
    """Build ``model`` from ``values`` or raise :class:`KmsConfigError` naming each bad field."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(config)'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise KmsConfigError(f"invalid {model.__name__}: {problems}") from None
