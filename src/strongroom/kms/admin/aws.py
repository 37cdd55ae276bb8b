"""Admin twin of the AWS KMS provider (needs kms:CreateKey, CreateAlias, Disable/EnableKey, ...)."""

from __future__ import annotations

from typing import Any

from strongroom.kms.admin.base import KekAdmin


class AwsKekAdmin(KekAdmin):
    """AWS key life cycle over a boto3 KMS client.

    AWS never deletes a key immediately: the shortest path is a 7-day pending-deletion window, so
    :meth:`delete_kek` is refused. ``enforces_states`` is False when the endpoint is moto, which
    keeps decrypting with disabled and pending-deletion keys.
    """

    can_delete_now = False

    def __init__(self, client: Any, *, enforces_states: bool = True) -> None:
        self._client = client
        self.enforces_states = enforces_states

    def create_kek(self, alias: str) -> str:
        kek_id = str(self._client.create_key(KeySpec="SYMMETRIC_DEFAULT")["KeyMetadata"]["KeyId"])
        self._client.create_alias(AliasName=f"alias/{alias}", TargetKeyId=kek_id)
        return kek_id

    def rotate_kek(self, kek_id: str) -> None:
        self._client.rotate_key_on_demand(KeyId=kek_id)

    def disable_kek(self, kek_id: str) -> None:
        self._client.disable_key(KeyId=kek_id)

    def enable_kek(self, kek_id: str) -> None:
        self._client.enable_key(KeyId=kek_id)

    def schedule_deletion(self, kek_id: str) -> None:
        self._client.schedule_key_deletion(KeyId=kek_id, PendingWindowInDays=7)

    def cancel_deletion(self, kek_id: str) -> None:
        self._client.cancel_key_deletion(KeyId=kek_id)
        self._client.enable_key(KeyId=kek_id)  # AWS leaves a cancelled key Disabled

    def delete_kek(self, kek_id: str) -> None:
        raise NotImplementedError("AWS KMS cannot delete a key immediately; use schedule_deletion")

    def close(self) -> None:
        self._client.close()
