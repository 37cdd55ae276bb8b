"""Vault/OpenBao Transit specifics, exercised for real against OpenBao: rotation, soft-delete,
deletion, batch decrypt with mixed failures, namespaces and mount paths, least-privilege tokens,
and TLS verification."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kms_providers import new_alias

from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.api import Edek, KekState
from strongroom.kms.errors import (
    EdekInvalid,
    KekDisabled,
    KekNotFound,
    KekPendingDeletion,
    KmsAccessDenied,
    KmsConfigError,
    KmsMisconfigured,
    KmsTlsError,
    UnknownAlias,
)
from strongroom.kms.vault import VaultKms
from strongroom.testing.process import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def vault(openbao: Any) -> Iterator[VaultKms]:
    with VaultKms.from_config({"address": openbao.address, "token": openbao.token}) as kms:
        yield kms


@pytest.fixture
def admin(openbao: Any) -> Iterator[VaultKekAdmin]:
    twin = VaultKekAdmin(openbao.client())
    yield twin
    twin.close()


def test_rotation_keeps_old_edeks_and_wraps_with_the_new_version(vault: VaultKms, admin: VaultKekAdmin) -> None:
    kek = admin.create_kek(new_alias())
    old = vault.generate_dek(kek)
    assert old.edek.ciphertext.startswith(b"vault:v1:")
    admin.rotate_kek(kek)
    new = vault.generate_dek(kek)
    assert new.edek.ciphertext.startswith(b"vault:v2:")
    assert vault.unwrap(old.edek) == old.dek
    assert vault.unwrap(new.edek) == new.dek


def test_soft_delete_refuses_every_use_until_restored(openbao: Any, vault: VaultKms, admin: VaultKekAdmin) -> None:
    kek = admin.create_kek(new_alias())
    pair = vault.generate_dek(kek)
    client = openbao.client()
    client.adapter.delete(f"/v1/transit/keys/{kek}/soft-delete")
    assert vault.describe_kek(kek) is KekState.PENDING_DELETION
    with pytest.raises(KekPendingDeletion, match="soft-delete-restore"):
        vault.unwrap(pair.edek)
    with pytest.raises(KekPendingDeletion):
        vault.generate_dek(kek)
    with pytest.raises(KekPendingDeletion):
        vault.wrap(kek, b"k" * 32)
    assert isinstance(vault.unwrap_many([pair.edek])[0], KekPendingDeletion)
    client.adapter.post(f"/v1/transit/keys/{kek}/soft-delete-restore")
    assert vault.describe_kek(kek) is KekState.ENABLED
    assert vault.unwrap(pair.edek) == pair.dek


def test_deletion_is_kek_not_found(openbao: Any, vault: VaultKms, admin: VaultKekAdmin) -> None:
    alias = new_alias()
    kek = admin.create_kek(alias)
    pair = vault.generate_dek(kek)
    client = openbao.client()
    client.secrets.transit.update_key_configuration(name=kek, deletion_allowed=True)
    client.secrets.transit.delete_key(name=kek)
    with pytest.raises(KekNotFound) as info:
        vault.unwrap(pair.edek)
    assert not isinstance(info.value, KekPendingDeletion)
    assert vault.describe_kek(kek) is KekState.MISSING
    with pytest.raises(UnknownAlias):
        vault.resolve_alias(alias)


def test_key_info_shows_what_kek_state_cannot(openbao: Any, vault: VaultKms, admin: VaultKekAdmin) -> None:
    kek = admin.create_kek(new_alias())
    admin.rotate_kek(kek)
    info = vault.key_info(kek)
    assert (info.state, info.latest_version, info.min_decryption_version, info.deletion_allowed) == (
        KekState.ENABLED,
        2,
        1,
        False,
    )
    openbao.client().secrets.transit.update_key_configuration(name=kek, deletion_allowed=True)
    assert vault.describe_kek(kek) is KekState.ENABLED  # still usable ...
    assert vault.key_info(kek).deletion_allowed  # ... but one call away from deletion
    assert vault.key_info(new_alias()).state is KekState.MISSING


def test_a_soft_deleted_key_can_still_be_deleted_for_good(vault: VaultKms, admin: VaultKekAdmin) -> None:
    kek = admin.create_kek(new_alias())
    pair = vault.generate_dek(kek)
    admin.schedule_deletion(kek)
    admin.delete_kek(kek)
    with pytest.raises(KekNotFound):
        vault.unwrap(pair.edek)


def test_batch_decrypt_reports_mixed_failures_per_item(vault: VaultKms, admin: VaultKekAdmin) -> None:
    kek = admin.create_kek(new_alias())
    retired = vault.generate_dek(kek)
    admin.disable_kek(kek)  # rotate + min_decryption_version=latest: v1 EDEKs are refused
    good = vault.generate_dek(kek)
    results = vault.unwrap_many(
        [good.edek, Edek("vault", kek, b"vault:v2:AAAA"), retired.edek, Edek("vault", kek, b"nope")]
    )
    assert results[0] == good.dek
    assert isinstance(results[1], EdekInvalid)
    assert isinstance(results[2], KekDisabled)
    assert isinstance(results[3], EdekInvalid)
    admin.enable_kek(kek)
    assert vault.unwrap_many([retired.edek]) == [retired.dek]


def test_namespace_and_mount_path(openbao: Any) -> None:
    import hvac

    namespace = "team-" + new_alias()
    root = openbao.client()
    root.adapter.post(f"/v1/sys/namespaces/{namespace}")
    scoped = hvac.Client(url=openbao.address, token=openbao.token, namespace=namespace)
    scoped.sys.enable_secrets_engine("transit", path="kms/transit")
    VaultKekAdmin(scoped, mount_path="kms/transit").create_kek("orders")
    config = {"address": openbao.address, "token": openbao.token}
    with VaultKms.from_config(config | {"namespace": namespace, "mount_path": "kms/transit"}) as kms:
        pair = kms.generate_dek(kms.resolve_alias("orders"))
        assert kms.unwrap(pair.edek) == pair.dek
    with VaultKms.from_config(config | {"mount_path": "kms/transit"}) as outside:
        # outside the namespace the mount does not exist: a configuration error, not a lost KEK
        with pytest.raises(KmsMisconfigured, match="no Transit engine"):
            outside.resolve_alias("orders")
        with pytest.raises(KmsMisconfigured):
            outside.unwrap(pair.edek)
        assert isinstance(outside.unwrap_many([pair.edek])[0], KmsMisconfigured)


def test_least_privilege_token(openbao: Any, admin: VaultKekAdmin) -> None:
    """The policy docs/threat-model.md recommends for readers and writers is enough, and no more."""
    kek = admin.create_kek(new_alias())
    root = openbao.client()
    root.sys.create_or_update_policy(
        name="strongroom-writer",
        policy=(
            'path "transit/keys/*" { capabilities = ["read"] }\n'
            'path "transit/datakey/plaintext/*" { capabilities = ["update"] }\n'
        ),
    )
    token = root.auth.token.create(policies=["strongroom-writer"], ttl="10m")["auth"]["client_token"]
    with VaultKms.from_config({"address": openbao.address, "token": token}) as writer:
        assert writer.resolve_alias(kek) == kek
        pair = writer.generate_dek(kek)
        with pytest.raises(KmsAccessDenied):
            writer.unwrap(pair.edek)  # a writer cannot read back: decrypt needs its own grant


def test_config_validation_never_echoes_the_token() -> None:
    with pytest.raises(KmsConfigError) as info:
        VaultKms.from_config({"address": "not a url", "token": "hvs.SECRET-TOKEN-VALUE", "colour": "red"})
    message = str(info.value)
    assert "address" in message
    assert "colour" in message
    assert "SECRET-TOKEN-VALUE" not in message
    with pytest.raises(KmsConfigError, match="token"):
        VaultKms.from_config({"address": "http://127.0.0.1:8200", "token": "  "})


@pytest.fixture(scope="module")
def openbao_tls() -> Iterator[tuple[str, str, Path]]:
    """A second OpenBao dev server with ``-dev-tls`` (self-signed CA), stopped after the module."""
    from strongroom.testing.openbao import bao_executable

    port = free_port()
    while not _port_free(port + 1):
        port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="strongroom-bao-tls-"))
    token = "tls-" + new_alias()
    argv = [
        bao_executable(),
        "server",
        "-dev",
        "-dev-tls",
        f"-dev-tls-cert-dir={workdir}",
        f"-dev-root-token-id={token}",
        f"-dev-listen-address=127.0.0.1:{port}",
    ]
    log = (workdir / "bao.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HOME": str(workdir)})
    try:
        ca = workdir / "vault-ca.pem"
        deadline = time.monotonic() + 60
        while not (ca.exists() and _answers(f"https://127.0.0.1:{port}", ca)):
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"OpenBao -dev-tls did not start; see {workdir / 'bao.log'}")
            time.sleep(0.2)
        yield f"https://127.0.0.1:{port}", token, ca
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _answers(address: str, ca: Path) -> bool:
    import ssl

    try:
        context = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(f"{address}/v1/sys/health", context=context, timeout=1):  # noqa: S310
            return True
    except OSError:
        return False


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_verification(openbao_tls: tuple[str, str, Path]) -> None:
    address, token, ca = openbao_tls
    import hvac

    hvac.Client(url=address, token=token, verify=str(ca)).sys.enable_secrets_engine("transit")
    VaultKekAdmin(hvac.Client(url=address, token=token, verify=str(ca))).create_kek("tls-kek")
    with VaultKms.from_config({"address": address, "token": token, "ca_cert": ca}) as trusted:
        pair = trusted.generate_dek("tls-kek")
        assert trusted.unwrap(pair.edek) == pair.dek
    with VaultKms.from_config({"address": address, "token": token}) as untrusting, pytest.raises(KmsTlsError):
        untrusting.unwrap(pair.edek)
    with VaultKms.from_config({"address": address, "token": token, "verify_tls": False}) as unverified:
        assert unverified.unwrap(pair.edek) == pair.dek
