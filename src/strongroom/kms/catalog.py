"""Several KMSes in one file: the ``kms:`` section of a rules file (or of a ``--kms-config`` file).

::

    kms:
      eu-vault: {provider: vault, address: "https://vault.eu:8200", token_file: ...}
      us-aws:   {provider: aws, region: us-east-1}
    rules:
      - {topic: orders, kek: "pii-$(topic)", kms: eu-vault}
      - {topic: payments, kek: "pay-$(topic)", kms: us-aws, missing_kek: create}

Each entry is a :func:`~strongroom.kms.registry.kms_from_config` settings dict. Its ``name`` — the
provider name EDEKs and envelopes carry, by which strongroom later finds the KMS that unwraps them —
defaults to the entry's key, so two Vaults in one file never share a name. The catalog holds settings
that may include tokens: its ``repr`` shows names only, and rules never carry it (they travel to
executors; KMS settings stay on the driver).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from strongroom.errors import KmsError
from strongroom.kms.api import Edek, Kms
from strongroom.kms.errors import EdekInvalid, KmsConfigError
from strongroom.text import SecretFileError, load_secret_settings

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class KmsCatalog:
    """Named KMS settings, built into KMSes on demand."""

    def __init__(self, configs: Mapping[str, Mapping[str, Any]] | None = None, *, source: str = "kms:") -> None:
        self._configs: dict[str, dict[str, Any]] = {}
        for name, config in (configs or {}).items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise KmsConfigError(f"{source} KMS name {name!r} is not 1-64 letters, digits, '.', '_' or '-'")
            if not isinstance(config, Mapping) or not isinstance(config.get("provider"), str):
                raise KmsConfigError(
                    f"{source} entry {name!r} is not a KMS settings mapping with a provider",
                    hint="write e.g. `eu-vault: {provider: vault, address: ..., token: ...}`",
                )
            self._configs[name] = {"name": name, **dict(config)}

    @classmethod
    def load(cls, path: str | Path) -> KmsCatalog:
        """The ``kms:`` section of a JSON or YAML file (a rules file); empty when it has none."""
        try:
            data = load_secret_settings(path, "KMS settings file")
        except SecretFileError as exc:
            raise KmsConfigError(str(exc), hint=exc.hint) from None
        section = data.get("kms") if isinstance(data, Mapping) else None
        if section is None:
            return cls()
        if not isinstance(section, Mapping):
            raise KmsConfigError(f"the kms: section of {path} must map names to KMS settings")
        return cls(section, source=f"{path} kms:")

    def names(self) -> list[str]:
        return sorted(self._configs)

    def __bool__(self) -> bool:
        return bool(self._configs)

    def __repr__(self) -> str:
        return f"KmsCatalog({self.names()})"

    def config(self, name: str) -> dict[str, Any]:
        """One entry's settings (holds secrets: for :func:`kms_from_config` only)."""
        try:
            return dict(self._configs[name])
        except KeyError:
            raise KmsConfigError(
                f"no KMS named {name!r} (defined: {', '.join(self.names()) or 'none'})",
                hint="add it to the kms: section",
            ) from None

    def configs(self) -> dict[str, dict[str, Any]]:
        """Every entry's settings, for a job's settings on the driver (hold secrets)."""
        return {name: dict(config) for name, config in self._configs.items()}

    def build(self, **defaults: Any) -> dict[str, Kms]:
        """Every KMS, built with ``defaults`` under each entry's own settings (e.g. ``cache=False``)."""
        from strongroom.kms.registry import kms_from_config

        return {name: kms_from_config({**defaults, **config}) for name, config in self._configs.items()}


class KmsGroup(dict[str, Kms]):
    """Several KMSes by the provider name their EDEKs carry: what a key table and the recovery checker take
    when wrapping keys may name any of them. :meth:`close` closes each."""

    def __init__(self, kmses: Iterable[Kms]) -> None:
        super().__init__()
        for kms in kmses:
            if kms.name in self:
                raise KmsConfigError(
                    f"two KMSes share the provider name {kms.name!r}: EDEKs name their KMS by it",
                    hint="give each KMS its own name: in its settings",
                )
            self[kms.name] = kms

    def unwrap_many(self, edeks: Sequence[Edek]) -> list[bytes | KmsError]:
        """Each EDEK unwrapped by the KMS it names (one batch per KMS); an unknown KMS is an invalid EDEK."""
        results: list[bytes | KmsError | None] = [None] * len(edeks)
        by_kms: dict[str, list[int]] = {}
        for index, edek in enumerate(edeks):
            if edek.provider in self:
                by_kms.setdefault(edek.provider, []).append(index)
            else:
                results[index] = EdekInvalid(f"EDEK of {edek.kek_ref!r} names a KMS none of {sorted(self)} is")
        for name, indexes in by_kms.items():
            for index, outcome in zip(indexes, self[name].unwrap_many([edeks[i] for i in indexes]), strict=True):
                results[index] = outcome
        return [r for r in results if r is not None]

    def close(self) -> None:
        for kms in self.values():
            kms.close()
