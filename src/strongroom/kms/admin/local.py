"""Admin twin of the local KMS (a thin adapter over :class:`~strongroom.kms.local.LocalKeyringAdmin`)."""

from __future__ import annotations

from strongroom.kms.admin.base import KekAdmin
from strongroom.kms.api import KekState
from strongroom.kms.local import LocalKeyringAdmin, LocalKms


class LocalKekAdmin(KekAdmin):
    """Every state is real: the keyring stores it."""

    def __init__(self, kms: LocalKms) -> None:
        self._admin = LocalKeyringAdmin(kms.keyring)

    def create_kek(self, alias: str) -> str:
        return self._admin.create_kek(alias)

    def rotate_kek(self, kek_id: str) -> None:
        self._admin.rotate_kek(kek_id)

    def disable_kek(self, kek_id: str) -> None:
        self._admin.set_state(kek_id, KekState.DISABLED)

    def enable_kek(self, kek_id: str) -> None:
        self._admin.set_state(kek_id, KekState.ENABLED)

    def schedule_deletion(self, kek_id: str) -> None:
        self._admin.set_state(kek_id, KekState.PENDING_DELETION)

    def cancel_deletion(self, kek_id: str) -> None:
        self._admin.set_state(kek_id, KekState.ENABLED)

    def delete_kek(self, kek_id: str) -> None:
        self._admin.delete_kek(kek_id)
