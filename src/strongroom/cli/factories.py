"""What commands build from their options: the KMS, the record format, the key chain. One factory each;
every KMS is made by :func:`strongroom.kms.registry.kms_from_config` from a settings dict (the
Kroxylicious in-memory test KMS, which has no settings form, is the one exception)."""

from __future__ import annotations

import os
from typing import Any

from strongroom.cli.common import RecordSourceOptions, load_kms_config
from strongroom.errors import ConfigError
from strongroom.text import SecretFileError, load_secret_settings, read_secret_file


def check_format_options(source: RecordSourceOptions) -> None:
    """Refuse a format/KMS combination before connecting to anything (Kroxylicious needs vault|aws|inmemory)."""
    from strongroom.recovery.formats import record_format

    kind = source.kms_kind
    if source.record_format == "kroxylicious" and not source.kms_config:
        record_format("kroxylicious", kms_kind=None if kind == "none" else kind)


def build_kms(source: RecordSourceOptions) -> Any:
    """The KMS for the options (RetryingKms inside; no DEK cache: the checker keeps verdicts only).

    A ``--kms-config`` file with a ``kms:`` section (a rules file naming several KMSes, a KEK per topic)
    gives a :class:`~strongroom.kms.catalog.KmsGroup`: every KMS, by the provider name its EDEKs carry."""
    from strongroom.kms.catalog import KmsCatalog, KmsGroup
    from strongroom.kms.registry import kms_from_config

    retry: dict[str, Any] = {"max_attempts": source.kms_attempts, "deadline_seconds": source.kms_deadline}
    catalog = KmsCatalog.load(source.kms_config) if source.kms_config else None
    if catalog:
        return KmsGroup(catalog.build(cache=False, retry=retry).values())
    if source.kms_config:
        config = load_kms_config(source.kms_config)
        config.setdefault("cache", False)
        config.setdefault("retry", retry)
        return kms_from_config(config)
    kind = source.kms_kind
    name = source.kms_name or kind
    if kind in (None, "none"):
        return None
    if kind == "inmemory":
        from strongroom.kms.retrying import RetryingKms
        from strongroom.recovery.formats import KroxyliciousInMemoryKms

        if not source.kek_file:
            raise ConfigError("--kms inmemory needs --kek-file", hint='write {"<KEK uuid>": "<base64 key>"}')
        try:
            keks = load_secret_settings(source.kek_file, "--kek-file", yaml_syntax=False)
        except SecretFileError as exc:
            raise ConfigError(str(exc), hint=exc.hint) from None
        return RetryingKms(KroxyliciousInMemoryKms.from_json(keks, name=name or "inmemory"), **retry)
    settings: dict[str, Any] = {"provider": kind, "name": name, "cache": False, "retry": retry}
    if kind == "vault":
        address = source.vault_address
        if not address:
            raise ConfigError("--kms vault needs --vault-address (or env VAULT_ADDR)")
        token = os.environ.get("STRONGROOM_VAULT_TOKEN") or os.environ.get("VAULT_TOKEN")
        if source.vault_token_file:
            try:
                token = read_secret_file(source.vault_token_file, "--vault-token-file").strip()
            except SecretFileError as exc:
                raise ConfigError(str(exc), hint=exc.hint) from None
        if not token:
            raise ConfigError(
                "--kms vault needs a token",
                hint="set STRONGROOM_VAULT_TOKEN (or VAULT_TOKEN) or pass --vault-token-file",
            )
        settings.update(address=address, token=token, mount_path=source.vault_mount)
    elif kind == "aws":
        if source.aws_region:
            settings["region"] = source.aws_region
        if source.aws_endpoint_url:
            settings["endpoint_url"] = source.aws_endpoint_url
    elif kind == "local":
        if not source.keyring:
            raise ConfigError("--kms local needs --keyring PATH")
        settings["path"] = source.keyring
        passphrase = os.environ.get("STRONGROOM_LOCAL_KMS_PASSPHRASE")
        if passphrase:
            settings["passphrase"] = passphrase
    return kms_from_config(settings)


def load_kms(path: str | None) -> Any:
    """A KMS from ``--kms-config`` (cache off: rewrap wants real calls)."""
    from strongroom.kms.registry import kms_from_config

    config = load_kms_config(path)
    config.setdefault("cache", False)
    return kms_from_config(config)


def open_key_chain(source: RecordSourceOptions, config: Any, kms: Any) -> Any:
    """The keys table (read-only, unregistered) when --keys-topic is given: subject key → wrapping key → KEK."""
    if not source.keys_topic:
        return None
    from strongroom.keys.table import KeyTable

    table = KeyTable(config, kms, topic=source.keys_topic, register=False, seal_usage=False).open()
    try:
        table.wait_caught_up(120.0)
    except BaseException:
        table.close()
        raise
    return table


def build_format(source: RecordSourceOptions, kms: Any) -> Any:
    from strongroom.kms.catalog import KmsGroup
    from strongroom.recovery.formats import record_format
    from strongroom.recovery.formats.strongroom import DEFAULT_KMS_KINDS, StrongroomFormat

    if isinstance(kms, KmsGroup) and source.record_format == "strongroom":
        kinds = {name: _kms_kind(source, one) for name, one in kms.items()}
        return StrongroomFormat({**DEFAULT_KMS_KINDS, **{name: kind for name, kind in kinds.items() if kind}})
    return record_format(
        source.record_format,
        kms_kind=_kms_kind(source, kms),
        provider_name=kms.name if kms is not None else source.kms_name,
    )


def _kms_kind(source: RecordSourceOptions, kms: Any) -> str | None:
    """The KMS kind from --kms, or from the provider --kms-config built."""
    kind: str | None = source.kms_kind
    if kind not in (None, "none") or kms is None:
        return None if kind == "none" else kind
    inner = kms.unwrapped() if hasattr(kms, "unwrapped") else kms
    kinds = {"VaultKms": "vault", "AwsKms": "aws", "LocalKms": "local", "KroxyliciousInMemoryKms": "inmemory"}
    return kinds.get(type(inner).__name__)
