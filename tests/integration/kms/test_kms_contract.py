"""The KMS contract: every provider (local, Vault/OpenBao, AWS/moto) passes the same tests.

Where a provider cannot show a behaviour for real, the test is skipped with the reason, never
faked: moto does not refuse disabled or pending-deletion keys and accepts any credentials; AWS
cannot delete a key immediately; Transit has no whole-key "disabled" state (its twin emulates it
with ``min_decryption_version``, so unwrap is checked but describe stays ENABLED).
"""

from __future__ import annotations

import pytest
from kms_providers import ProviderUnderTest, new_alias

from strongroom.kms.api import DekPair, Edek, KekState
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    KmsAccessDenied,
    KmsUnavailable,
    UnknownAlias,
)


def _kek(provider: ProviderUnderTest) -> str:
    return provider.admin.create_kek(new_alias())


def test_generate_dek_and_unwrap_round_trip(provider: ProviderUnderTest) -> None:
    kek_id = _kek(provider)
    pair = provider.kms.generate_dek(kek_id)
    assert isinstance(pair, DekPair)
    assert len(pair.dek) == 32
    assert pair.edek.provider == provider.kms.name == provider.name
    assert pair.edek.kek_id == kek_id
    assert pair.dek.hex() not in repr(pair)
    assert provider.kms.unwrap(pair.edek) == pair.dek
    # EDEKs survive serialization to bytes and to JSON-safe dicts
    assert provider.kms.unwrap(Edek.from_bytes(pair.edek.to_bytes())) == pair.dek
    assert provider.kms.unwrap(Edek.from_dict(pair.edek.to_dict())) == pair.dek
    assert provider.kms.generate_dek(kek_id).dek != pair.dek


def test_wrap_round_trip(provider: ProviderUnderTest) -> None:
    kek_id = _kek(provider)
    secret = bytes(range(32))
    edek = provider.kms.wrap(kek_id, secret)
    assert edek.kek_id == kek_id
    assert secret not in edek.ciphertext
    assert provider.kms.unwrap(edek) == secret


def test_a_bound_wrap_unwraps_only_with_its_context(provider: ProviderUnderTest) -> None:
    """Binding (transit associated_data, AWS EncryptionContext, local AAD): the wrapping-key EDEKs' defence."""
    import dataclasses

    from strongroom.errors import KmsError

    kek_id = _kek(provider)
    secret = bytes(range(32))
    edek = provider.kms.wrap(kek_id, secret, b"strongroom/wk/v1\x00" + b"A" * 16)
    assert provider.kms.unwrap(edek) == secret
    assert provider.kms.unwrap_many([edek]) == [secret]
    for other in (b"strongroom/wk/v1\x00" + b"B" * 16, b""):
        with pytest.raises(KmsError):
            provider.kms.unwrap(dataclasses.replace(edek, context=other))
    assert provider.kms.unwrap(provider.kms.wrap(kek_id, secret)) == secret  # unbound, as before


def test_unwrap_many_reports_each_edek(provider: ProviderUnderTest) -> None:
    kek_id, other_kek = _kek(provider), _kek(provider)
    pairs = [provider.kms.generate_dek(kek_id) for _ in range(3)] + [provider.kms.generate_dek(other_kek)]
    edeks = [pair.edek for pair in pairs]
    edeks.insert(2, provider.garbage_edek(kek_id))
    edeks.append(Edek(provider.name, provider.missing_kek_id, pairs[0].edek.ciphertext))
    results = provider.kms.unwrap_many(edeks)
    assert len(results) == 6
    assert [results[i] for i in (0, 1, 3, 4)] == [pair.dek for pair in pairs]
    assert isinstance(results[2], EdekInvalid)
    assert isinstance(results[5], KekNotFound)
    assert provider.kms.unwrap_many([]) == []


def test_resolve_alias(provider: ProviderUnderTest) -> None:
    alias = new_alias()
    kek_id = provider.admin.create_kek(alias)
    assert provider.kms.resolve_alias(alias) == kek_id
    with pytest.raises(UnknownAlias, match=r"does not exist|no key"):
        provider.kms.resolve_alias(new_alias())


def test_describe_states(provider: ProviderUnderTest) -> None:
    kek_id = _kek(provider)
    assert provider.kms.describe_kek(kek_id) is KekState.ENABLED
    assert provider.kms.describe_kek(provider.missing_kek_id) is KekState.MISSING
    if provider.admin.can_disable:
        provider.admin.disable_kek(kek_id)
        assert provider.kms.describe_kek(kek_id) is KekState.DISABLED
        provider.admin.enable_kek(kek_id)
        assert provider.kms.describe_kek(kek_id) is KekState.ENABLED
    provider.admin.schedule_deletion(kek_id)
    assert provider.kms.describe_kek(kek_id) is KekState.PENDING_DELETION
    provider.admin.cancel_deletion(kek_id)
    assert provider.kms.describe_kek(kek_id) is KekState.ENABLED


def test_unknown_kek_is_kek_not_found(provider: ProviderUnderTest) -> None:
    real = provider.kms.generate_dek(_kek(provider))
    with pytest.raises(KekNotFound) as info:
        provider.kms.unwrap(Edek(provider.name, provider.missing_kek_id, real.edek.ciphertext))
    assert "recover scan" in str(info.value)
    with pytest.raises(KekNotFound):
        provider.kms.generate_dek(provider.missing_kek_id)


def test_deleted_kek_is_kek_not_found(provider: ProviderUnderTest) -> None:
    if not provider.admin.can_delete_now:
        pytest.skip("AWS KMS cannot delete a key immediately (only a 7-30 day pending deletion)")
    kek_id = _kek(provider)
    pair = provider.kms.generate_dek(kek_id)
    provider.admin.delete_kek(kek_id)
    with pytest.raises(KekNotFound):
        provider.kms.unwrap(pair.edek)
    assert provider.kms.describe_kek(kek_id) is KekState.MISSING


def test_pending_deletion_refuses_then_restores(provider: ProviderUnderTest) -> None:
    if not provider.admin.enforces_states:
        pytest.skip("moto keeps decrypting with a pending-deletion key; covered by OpenBao and local")
    kek_id = _kek(provider)
    pair = provider.kms.generate_dek(kek_id)
    provider.admin.schedule_deletion(kek_id)
    with pytest.raises(KekPendingDeletion):
        provider.kms.unwrap(pair.edek)
    with pytest.raises(KekPendingDeletion):
        provider.kms.generate_dek(kek_id)
    provider.admin.cancel_deletion(kek_id)
    assert provider.kms.unwrap(pair.edek) == pair.dek


def test_disabled_kek_refuses_then_enables(provider: ProviderUnderTest) -> None:
    if not provider.admin.enforces_states:
        pytest.skip("moto keeps decrypting with a disabled key; covered by OpenBao and local")
    kek_id = _kek(provider)
    pair = provider.kms.generate_dek(kek_id)
    provider.admin.disable_kek(kek_id)
    with pytest.raises(KekDisabled):
        provider.kms.unwrap(pair.edek)
    provider.admin.enable_kek(kek_id)
    assert provider.kms.unwrap(pair.edek) == pair.dek


def test_unreachable_kms_is_unavailable_not_not_found(provider: ProviderUnderTest) -> None:
    if provider.unreachable is None:
        pytest.skip("the local KMS has no network endpoint")
    kek_id = _kek(provider)
    pair = provider.kms.generate_dek(kek_id)
    with provider.unreachable() as unreachable:
        for call in (
            lambda: unreachable.unwrap(pair.edek),
            lambda: unreachable.generate_dek(kek_id),
            lambda: unreachable.resolve_alias("anything"),
            lambda: unreachable.describe_kek(kek_id),
            lambda: unreachable.unwrap_many([pair.edek]),
        ):
            with pytest.raises(KmsUnavailable):
                call()


def test_wrong_credentials_are_access_denied(provider: ProviderUnderTest) -> None:
    if provider.wrong_credentials is None:
        pytest.skip("moto accepts any AWS credentials")
    kek_id = _kek(provider)
    pair = provider.kms.generate_dek(kek_id)
    with pytest.raises(KmsAccessDenied) as info, provider.wrong_credentials() as denied:
        denied.unwrap(pair.edek)
    assert "not-a-valid-token" not in str(info.value)


def test_edek_of_another_provider_is_refused(provider: ProviderUnderTest) -> None:
    pair = provider.kms.generate_dek(_kek(provider))
    foreign = Edek("elsewhere", pair.edek.kek_id, pair.edek.ciphertext)
    with pytest.raises(EdekInvalid, match="elsewhere"):
        provider.kms.unwrap(foreign)
    assert isinstance(provider.kms.unwrap_many([foreign])[0], EdekInvalid)
