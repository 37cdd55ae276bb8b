"""Shared pieces of the provider configuration models (pydantic v2 / pydantic-settings).

Every provider config validates itself on construction. Validation messages are rebuilt from the
error locations and reasons only: pydantic's own text echoes the offending input, which for a
token or secret key would put the secret into a log line.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from strongroom.kms.errors import KmsConfigError, KmsProviderMissing
from strongroom.text import problem_list

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
        problems = problem_list(exc.errors(include_input=False, include_url=False))
        raise KmsConfigError(f"invalid {model.__name__}: {problems}") from None


def provider_package(package: str, *, provider: str, extra: str, submodules: tuple[str, ...] = ()) -> Any:
    """The optional ``package`` a provider is built on (and its ``submodules``), imported on first use: a
    missing one fails with the ``pip install 'strongroom[extra]'`` to run."""
    try:
        module = importlib.import_module(package)
        for name in submodules:
            importlib.import_module(f"{package}.{name}")
    except ImportError:
        raise KmsProviderMissing(
            f"the {provider} KMS provider needs the {package!r} package", hint=f"pip install 'strongroom[{extra}]'"
        ) from None
    return module


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback_url(url: str) -> bool:
    """True when ``url`` names this machine (127.0.0.0/8, ::1 or localhost): traffic never leaves it."""
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_tls(url: str | None, allow_plaintext_http: bool, field: str) -> None:
    """Refuse ``http://`` to a KMS on another machine: data keys would cross the network in clear.

    Raises ``ValueError`` (inside a pydantic validator it becomes a :class:`KmsConfigError`)."""
    if url is None or not url.lower().startswith("http://") or allow_plaintext_http or is_loopback_url(url):
        return
    raise ValueError(
        f"{field} uses plaintext http:// to a KMS that is not on this machine: data keys would cross the network in "
        "clear; use https://, or set allow_plaintext_http: true if the link is protected some other way"
    )
