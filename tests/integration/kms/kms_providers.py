"""Providers under test for the KMS contract suite (imported by its conftest and tests).

``local`` needs nothing; ``vault`` uses the session OpenBao dev server (shared ``openbao`` fixture
from strongroom's pytest plugin) and ``aws`` the session moto server (``moto_kms``). Both are
real servers spoken to over HTTP — nothing in the contract suite is mocked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strongroom.kms.admin.base import KekAdmin
from strongroom.kms.api import Edek, Kms
from strongroom.testing.process import free_port


@dataclass
class ProviderUnderTest:
    """One KMS provider plus what the contract tests need to drive it into every state."""

    name: str
    kms: Kms
    admin: KekAdmin
    #: A syntactically valid KEK id that names no key.
    missing_kek_id: str
    #: An EDEK for ``kek_id`` that the KMS cannot open.
    garbage_edek: Callable[[str], Edek]
    #: A KMS of this provider whose endpoint refuses connections (None: no network involved).
    unreachable: Callable[[], Kms] | None
    #: A KMS of this provider with credentials the server rejects (None: the server accepts any).
    wrong_credentials: Callable[[], Kms] | None


def new_alias() -> str:
    return "kek-" + uuid.uuid4().hex[:12]


def _local(tmp_path: Path) -> ProviderUnderTest:
    from strongroom.kms.admin.local import LocalKekAdmin
    from strongroom.kms.local import LocalKms

    path = tmp_path / "keyring.json"
    kms = LocalKms.from_config({"path": path, "passphrase": "correct horse", "create": True})
    return ProviderUnderTest(
        name="local",
        kms=kms,
        admin=LocalKekAdmin(kms),
        missing_kek_id=str(uuid.uuid4()),
        garbage_edek=lambda kek_id: Edek("local", kek_id, b"\x01\x00\x00\x00\x01" + bytes(60)),
        unreachable=None,
        wrong_credentials=lambda: LocalKms.from_config({"path": path, "passphrase": "wrong"}),
    )


def _vault(openbao: Any) -> ProviderUnderTest:
    from strongroom.kms.admin.vault import VaultKekAdmin
    from strongroom.kms.vault import VaultKms

    def make(**overrides: Any) -> VaultKms:
        return VaultKms.from_config({"address": openbao.address, "token": openbao.token} | overrides)

    return ProviderUnderTest(
        name="vault",
        kms=make(),
        admin=VaultKekAdmin(openbao.client()),
        missing_kek_id=new_alias(),
        garbage_edek=lambda kek_id: Edek("vault", kek_id, b"vault:v1:AAAA"),
        unreachable=lambda: make(address=f"http://127.0.0.1:{free_port()}", timeout_seconds=2),
        wrong_credentials=lambda: make(token="not-a-valid-token"),
    )


def _aws(moto_kms: Any) -> ProviderUnderTest:
    import boto3

    from strongroom.kms.admin.aws import AwsKekAdmin
    from strongroom.kms.aws import AwsKms

    credentials = {"access_key_id": "testing", "secret_access_key": "testing"}

    def make(**overrides: Any) -> AwsKms:
        base = {"region": moto_kms.region, "endpoint_url": moto_kms.endpoint_url} | credentials
        return AwsKms.from_config(base | overrides)

    client = boto3.client(
        "kms",
        region_name=moto_kms.region,
        endpoint_url=moto_kms.endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return ProviderUnderTest(
        name="aws",
        kms=make(),
        admin=AwsKekAdmin(client, enforces_states=False),  # moto keeps using disabled keys
        missing_kek_id=str(uuid.uuid4()),
        garbage_edek=lambda kek_id: Edek("aws", kek_id, b"not a ciphertext blob" * 3),
        unreachable=lambda: make(endpoint_url=f"http://127.0.0.1:{free_port()}", connect_timeout_seconds=2),
        wrong_credentials=None,  # moto accepts any credentials
    )


def make_provider(name: str, request: Any, tmp_path: Path) -> ProviderUnderTest:
    if name == "local":
        return _local(tmp_path)
    if name == "vault":
        return _vault(request.getfixturevalue("openbao"))
    return _aws(request.getfixturevalue("moto_kms"))
