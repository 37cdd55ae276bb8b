"""Build a KMS from a plain config dict: built-in providers by name, user providers by dotted path.

Providers load lazily, so ``hvac``/``boto3`` are imported only when that provider is used; a missing
optional dependency fails with the ``pip install 'strongroom[extra]'`` to run. The standard
wrappers are stacked from the same dict::

    kms_from_config({"provider": "vault", "address": "https://vault:8200", "token": "...",
                     "cache": {"ttl_seconds": 600}, "retry": {"max_attempts": 3}, "metrics": True})

gives ``CachingKms(RetryingKms(MeteredKms(VaultKms)))``: metrics count real round trips, retries
happen below the cache, and cache hits cost nothing. ``cache`` and ``retry`` are on by default;
pass ``False`` to turn one off.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final

from strongroom.kms.api import Kms
from strongroom.kms.caching import CachingKms
from strongroom.kms.errors import KmsConfigError, KmsProviderMissing
from strongroom.kms.metered import MeteredKms
from strongroom.kms.retrying import RetryingKms

#: Built-in providers: name → "module:Class". Extend by passing a dotted path as ``provider``.
PROVIDERS: Final = {
    "local": "strongroom.kms.local:LocalKms",
    "vault": "strongroom.kms.vault:VaultKms",
    "aws": "strongroom.kms.aws:AwsKms",
}


def load_provider(provider: str) -> type[Kms]:
    """The KMS class for a built-in name or a ``package.module:Class`` / ``package.module.Class`` path."""
    target = PROVIDERS.get(provider, provider)
    if ":" in target:
        module_name, _, class_name = target.partition(":")
    elif "." in target:
        module_name, _, class_name = target.rpartition(".")
    else:
        raise KmsConfigError(
            f"unknown KMS provider {provider!r}",
            hint=f"use one of {', '.join(sorted(PROVIDERS))} or a dotted path 'package.module:Class'",
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise KmsProviderMissing(
            f"cannot import KMS provider module {module_name!r} ({exc.name or exc})",
            hint="install the package that provides it",
        ) from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Kms)):
        raise KmsConfigError(f"KMS provider {target!r} is not a strongroom.kms.api.Kms subclass")
    return cls


def kms_from_config(config: Mapping[str, Any]) -> Kms:
    """Build the provider named by ``config["provider"]`` and stack the requested wrappers."""
    values = dict(config)
    provider = values.pop("provider", None)
    if not isinstance(provider, str) or not provider:
        raise KmsConfigError("KMS config has no 'provider'", hint=f"set provider to one of {sorted(PROVIDERS)}")
    cache = values.pop("cache", True)
    retry = values.pop("retry", True)
    metrics = values.pop("metrics", False)
    cls = load_provider(provider)
    from_config = getattr(cls, "from_config", None)
    kms: Kms = from_config(values) if callable(from_config) else cls(**values)
    if metrics:
        kms = MeteredKms(kms)
    if retry:
        kms = RetryingKms(kms, **_options("retry", retry))
    if cache:
        kms = CachingKms(kms, **_options("cache", cache))
    return kms


def _options(key: str, value: Any) -> dict[str, Any]:
    if value is True:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    raise KmsConfigError(f"KMS config {key!r} must be true, false or a mapping of options")
