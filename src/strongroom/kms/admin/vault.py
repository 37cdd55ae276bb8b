"""Admin twin of the Vault/OpenBao Transit KMS (needs a token that may manage ``<mount>/keys``)."""

from __future__ import annotations

from typing import Any

from strongroom.kms.admin.base import KekAdmin


class VaultKekAdmin(KekAdmin):
    """Transit key life cycle over an ``hvac.Client``.

    Soft-delete (``DELETE keys/<name>/soft-delete``) is the restorable deletion; deletion proper
    needs ``deletion_allowed=true`` first. "Disable" is emulated with ``min_decryption_version``
    (see the package docstring).
    """

    can_disable = False

    def __init__(self, client: Any, mount_path: str = "transit") -> None:
        self._client = client
        self._transit = client.secrets.transit
        self._mount = mount_path

    def create_kek(self, alias: str) -> str:
        self._transit.create_key(name=alias, key_type="aes256-gcm96", mount_point=self._mount)
        return alias

    def rotate_kek(self, kek_id: str) -> None:
        self._transit.rotate_key(name=kek_id, mount_point=self._mount)

    def disable_kek(self, kek_id: str) -> None:
        """Refuse every existing key version: rotate, then require the new version to decrypt."""
        self.rotate_kek(kek_id)
        latest = self._transit.read_key(name=kek_id, mount_point=self._mount)["data"]["latest_version"]
        self._transit.update_key_configuration(name=kek_id, min_decryption_version=latest, mount_point=self._mount)

    def enable_kek(self, kek_id: str) -> None:
        self._transit.update_key_configuration(name=kek_id, min_decryption_version=1, mount_point=self._mount)

    def schedule_deletion(self, kek_id: str) -> None:
        self._client.adapter.delete(f"/v1/{self._mount}/keys/{kek_id}/soft-delete")

    def cancel_deletion(self, kek_id: str) -> None:
        self._client.adapter.post(f"/v1/{self._mount}/keys/{kek_id}/soft-delete-restore")

    def delete_kek(self, kek_id: str) -> None:
        self._transit.update_key_configuration(name=kek_id, deletion_allowed=True, mount_point=self._mount)
        self._transit.delete_key(name=kek_id, mount_point=self._mount)

    def close(self) -> None:
        self._client.adapter.close()
