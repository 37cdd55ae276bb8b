"""Leaf errors of the KMS area. Callers never see a provider's own exception types.

The split matters to operators and to code: :class:`KmsUnavailable` is the only transient one (the
retry wrapper retries it and nothing else); :class:`KekNotFound` means data under that KEK cannot
be read until the KEK comes back, which is a recovery matter, never something to retry.
"""

from __future__ import annotations

from strongroom.errors import ConfigError, KmsError


class KekNotFound(KmsError):
    """The KEK does not exist (deleted, never created, or scheduled for deletion): data under it is lost."""

    default_hint = (
        "restore the KEK or cancel its deletion in the KMS; if it is gone for good, "
        "run `strongroom recover scan` to find the affected records"
    )


class KekPendingDeletion(KekNotFound):
    """The KEK is scheduled for deletion (AWS) or soft-deleted (Vault/OpenBao): still restorable."""

    default_hint = (
        "cancel the deletion now (AWS: CancelKeyDeletion; Vault/OpenBao: "
        "POST transit/keys/<name>/soft-delete-restore) before it becomes permanent"
    )


class KekDisabled(KmsError):
    """The KEK exists but is disabled (or the key version is below Vault's min_decryption_version)."""

    default_hint = "enable the KEK in the KMS (or lower min_decryption_version) and retry"


class KmsUnavailable(KmsError):
    """The KMS could not be reached or is overloaded (connection error, timeout, 5xx, throttling)."""

    default_hint = "transient: retry later; check the KMS address, network and the KMS's health"


class KmsMisconfigured(KmsError):
    """The KMS answered, but the configured location does not exist (e.g. a wrong Transit mount).

    Kept apart from :class:`KekNotFound` on purpose: a typo in a mount path must not look like
    every KEK was lost.
    """

    default_hint = "check the KMS configuration (Vault mount_path and namespace, AWS region/endpoint)"


class KmsTlsError(KmsError):
    """The KMS's TLS certificate could not be verified: a configuration problem, not an outage."""

    default_hint = (
        "set the CA bundle (ca_cert) to the CA that signed the KMS certificate, "
        "or check that the address names the right server"
    )


class KmsAccessDenied(KmsError):
    """The KMS refused our credentials or the policy does not allow the operation."""

    default_hint = "fix the credentials (token, AWS profile) or the KMS policy for this key"


class EdekInvalid(KmsError):
    """An EDEK that the KMS (or strongroom) cannot parse or that does not belong to this KEK."""

    default_hint = "the wrapped key is corrupt or belongs to another KEK/KMS; quarantine the record"


class UnknownAlias(KmsError):
    """A KEK alias that does not resolve to any key."""

    default_hint = "create the KEK/alias in the KMS or fix the KEK selector template"


class UnresolvedKek(KmsError):
    """A topic whose KEK alias does not resolve while its rule says ``missing_kek: fail``."""

    default_hint = (
        "create the KEK for this topic in that KMS, fix the rule's kek template, "
        "or set the rule's missing_kek: create to let strongroom create it"
    )


class KekCreationRefused(KmsError):
    """A rule asked for a missing KEK to be created (``missing_kek: create``) where that cannot happen."""

    default_hint = "create the KEK in the KMS yourself (`strongroom kek create` for a local keyring), or fix the alias"


class KmsConfigError(ConfigError):
    """A KMS configuration that does not validate (the message names the field, never its value)."""

    default_hint = "fix the KMS configuration field named above"


class KmsProviderMissing(ConfigError):
    """A KMS provider whose module or optional dependency is not installed."""

    default_hint = "install the extra named above, e.g. pip install 'strongroom[vault]'"
