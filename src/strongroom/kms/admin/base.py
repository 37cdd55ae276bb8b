"""The KEK administration interface every provider twin implements."""

from __future__ import annotations

from abc import ABC, abstractmethod


class KekAdmin(ABC):
    """Put KEKs into every life-cycle state. Ids are the provider's KEK ids (as in EDEKs)."""

    can_disable: bool = True
    can_delete_now: bool = True
    enforces_states: bool = True

    @abstractmethod
    def create_kek(self, alias: str) -> str:
        """Create a KEK reachable as ``alias``; return its KEK id."""

    @abstractmethod
    def rotate_kek(self, kek_id: str) -> None:
        """Add a new KEK version; new wraps use it, old EDEKs still unwrap."""

    @abstractmethod
    def disable_kek(self, kek_id: str) -> None:
        """Make the KEK refuse to unwrap (restorable)."""

    @abstractmethod
    def enable_kek(self, kek_id: str) -> None:
        """Undo :meth:`disable_kek`."""

    @abstractmethod
    def schedule_deletion(self, kek_id: str) -> None:
        """Start the provider's restorable deletion (AWS pending deletion, Transit soft-delete)."""

    @abstractmethod
    def cancel_deletion(self, kek_id: str) -> None:
        """Undo :meth:`schedule_deletion`; the KEK is usable again afterwards."""

    @abstractmethod
    def delete_kek(self, kek_id: str) -> None:
        """Delete the KEK for good: every EDEK under it becomes unreadable."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
