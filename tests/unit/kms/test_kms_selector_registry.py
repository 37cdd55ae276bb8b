"""KEK selection by template, the provider registry, and the envelope ↔ KMS bridge."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from strongroom.crypto import DekUsagePolicy
from strongroom.envelope import (
    RecordContext,
    SubjectErased,
    SubjectKeyRef,
    WrappedDekRef,
    decrypt_json_fields,
    decrypt_value,
    encrypt_json_fields,
    parse,
    seal,
)
from strongroom.kms import (
    CachingKms,
    KekNotFound,
    KmsConfigError,
    KmsProviderMissing,
    KmsUnavailable,
    MeteredKms,
    RetryingKms,
    TemplateKekSelector,
    UnresolvedKek,
    kms_from_config,
    load_provider,
)
from strongroom.kms.api import Kms
from strongroom.kms.envelope_keys import RotatingDekSource, edek_of, key_ref_for, kms_key_lookup
from strongroom.kms.errors import KekCreationRefused
from strongroom.kms.local import LocalKeyringAdmin, LocalKms
from strongroom.kms.wrapper import KmsWrapper
from strongroom.policies import MissingKek


@pytest.fixture
def kms(tmp_path: Path) -> LocalKms:
    return LocalKms.from_config({"path": tmp_path / "k.json", "create": True})


def test_selector_resolves_the_templated_alias(kms: LocalKms) -> None:
    kek = LocalKeyringAdmin(kms.keyring).create_kek("strongroom-orders")
    selector = TemplateKekSelector(kms)
    assert selector.alias_for("orders") == "strongroom-orders"
    assert selector.select("orders") == kek


def test_selector_rejects_unresolved_topics_by_default(kms: LocalKms) -> None:
    with pytest.raises(UnresolvedKek, match=r"topic 'payments'.*'strongroom-payments'"):
        TemplateKekSelector(kms).select("payments")


def test_selector_creates_a_missing_kek_when_the_rule_says_create(
    kms: LocalKms, caplog: pytest.LogCaptureFixture
) -> None:
    selector = TemplateKekSelector(kms, "kek-$(topic)", missing=MissingKek.CREATE)
    with caplog.at_level(logging.WARNING, logger="strongroom.kms.selector"):
        kek = selector.select("logs")
    assert kek == kms.resolve_alias("kek-logs")
    assert selector.select("logs") == kek  # created once, then found
    assert selector.created == ["kek-logs"]
    assert "created KEK" in caplog.text
    assert "'logs'" in caplog.text


def test_selector_never_creates_a_kek_on_an_outage(kms: LocalKms) -> None:
    class Down(KmsWrapper):
        def resolve_alias(self, alias: str) -> str:
            raise KmsUnavailable("kms down")

        def create_kek(self, alias: str) -> str:
            raise AssertionError("a KEK was created because the KMS was unreachable")

    selector = TemplateKekSelector(Down(kms), missing=MissingKek.CREATE)
    with pytest.raises(KmsUnavailable):
        selector.select("orders")
    assert selector.created == []


def test_a_kms_that_cannot_create_keks_refuses_clearly(kms: LocalKms) -> None:
    class NoCreate(KmsWrapper):
        def create_kek(self, alias: str) -> str:
            return Kms.create_kek(self, alias)

    with pytest.raises(KekCreationRefused, match="cannot be created") as caught:
        TemplateKekSelector(NoCreate(kms), "kek-$(topic)", missing="create").select("orders")  # type: ignore[arg-type]
    assert caught.value.hint


@pytest.mark.parametrize("template", ["", "kek-$(topicName)", "$(topic)-$(partition)"])
def test_selector_template_validation(kms: LocalKms, template: str) -> None:
    with pytest.raises(KmsConfigError):
        TemplateKekSelector(kms, template)


def test_selector_policy_validation(kms: LocalKms) -> None:
    with pytest.raises(ValueError, match="ignore"):
        TemplateKekSelector(kms, missing="ignore")  # type: ignore[arg-type]


def test_registry_builds_a_wrapped_provider(tmp_path: Path) -> None:
    config = {"provider": "local", "path": str(tmp_path / "k.json"), "create": True, "metrics": True}
    stack = kms_from_config(config)
    assert isinstance(stack, CachingKms)
    assert isinstance(stack.inner, RetryingKms)
    assert isinstance(stack.inner.inner, MeteredKms)
    assert isinstance(stack.unwrapped(), LocalKms)
    bare = kms_from_config(config | {"cache": False, "retry": False, "metrics": False})
    assert isinstance(bare, LocalKms)
    tuned = kms_from_config(config | {"cache": {"ttl_seconds": 5}, "retry": {"max_attempts": 2}})
    assert isinstance(tuned, CachingKms)
    assert tuned.inner.max_attempts == 2  # type: ignore[attr-defined]


def test_registry_dotted_path_and_errors(tmp_path: Path) -> None:
    assert load_provider("strongroom.kms.local:LocalKms") is LocalKms
    assert load_provider("strongroom.kms.local.LocalKms") is LocalKms
    with pytest.raises(KmsConfigError, match="unknown KMS provider 'gcp'"):
        load_provider("gcp")
    with pytest.raises(KmsProviderMissing, match="no_such_module"):
        load_provider("no_such_module:Kms")
    with pytest.raises(KmsConfigError, match="not a strongroom"):
        load_provider("json:JSONDecoder")
    with pytest.raises(KmsConfigError, match="no 'provider'"):
        kms_from_config({})
    with pytest.raises(KmsConfigError, match="'cache' must be"):
        kms_from_config({"provider": "local", "path": str(tmp_path / "k.json"), "create": True, "cache": 3})


def test_registry_validation_errors_name_fields_not_secrets() -> None:
    with pytest.raises(KmsConfigError) as info:
        kms_from_config({"provider": "aws", "region": "mars", "secret_access_key": "AKIA-SECRET-VALUE"})
    assert "region" in str(info.value)
    assert "AKIA-SECRET-VALUE" not in str(info.value)


def test_wrapped_dek_envelopes_through_the_kms(kms: LocalKms) -> None:
    kek = LocalKeyringAdmin(kms.keyring).create_kek("orders")
    pair = kms.generate_dek(kek)
    ref = key_ref_for(pair.edek)
    assert ref.kek_ref == f"local:{kek}"
    assert edek_of(ref) == pair.edek
    ctx = RecordContext("orders", b"key-1")
    envelope = seal(b"payload", pair.dek, ref, ctx)
    lookup = kms_key_lookup(CachingKms(kms))
    assert decrypt_value(envelope, lookup, ctx) == b"payload"
    doc = encrypt_json_fields(json.dumps({"a": 1}).encode(), ["$.a"], pair.dek, ref, ctx)
    assert json.loads(decrypt_json_fields(doc, lookup, ctx)) == {"a": 1}


def test_a_lost_kek_is_never_reported_as_an_erased_subject(kms: LocalKms) -> None:
    admin = LocalKeyringAdmin(kms.keyring)
    kek = admin.create_kek("orders")
    pair = kms.generate_dek(kek)
    ctx = RecordContext("orders", b"key-1")
    doc = encrypt_json_fields(b'{"a": 1}', ["$.a"], pair.dek, key_ref_for(pair.edek), ctx)
    admin.delete_kek(kek)
    with pytest.raises(KekNotFound):
        decrypt_json_fields(doc, kms_key_lookup(kms), ctx)  # not nulled, not SubjectErased


def test_key_lookup_routes_by_provider_and_to_the_subject_table(kms: LocalKms) -> None:
    subject_dek = bytes(32)
    lookup = kms_key_lookup({"local": kms}, subject_keys=lambda ref: None)
    ctx = RecordContext("t", b"s")
    with pytest.raises(SubjectErased):
        decrypt_value(seal(b"x", subject_dek, SubjectKeyRef(bytes(16)), ctx), lookup, ctx)
    with pytest.raises(KmsConfigError, match="'vault'"):
        lookup(WrappedDekRef("vault:k", b"e"))
    with pytest.raises(KmsConfigError, match="no subject key table"):
        kms_key_lookup(kms)(SubjectKeyRef(bytes(16)))


def test_rotating_dek_source_rotates_at_the_limit(kms: LocalKms) -> None:
    kek = LocalKeyringAdmin(kms.keyring).create_kek("orders")
    metered = MeteredKms(kms)
    source = RotatingDekSource(metered, kek, DekUsagePolicy(max_encryptions=3, max_age_seconds=None))
    ctx = RecordContext("orders", b"k")
    envelopes = [source.seal(b"r%d" % i, ctx) for i in range(7)]
    refs = [parse(e).key_ref for e in envelopes]
    assert len(set(refs)) == 3  # 3 + 3 + 1
    assert source.rotations == 3
    assert metered.snapshot()["operations"]["generate_dek"]["outcomes"] == {"ok": 3}
    lookup = kms_key_lookup(kms)
    assert [decrypt_value(e, lookup, ctx) for e in envelopes] == [b"r%d" % i for i in range(7)]
