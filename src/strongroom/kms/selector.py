"""KEK selection per topic: a template turns a topic name into a KEK alias the KMS resolves.

``TemplateKekSelector("strongroom-$(topic)")`` picks alias ``strongroom-orders`` for topic
``orders``. When the alias does not resolve, the policy decides: ``reject`` (default) raises
:class:`~strongroom.kms.errors.UnresolvedKek` naming topic and alias; ``passthrough`` returns None —
the caller writes the record unencrypted — counts it, and logs one warning per topic.

Only a KMS *answer* ("no such alias") counts as unresolved: if the KMS is unreachable or denies
access, the error propagates under every policy, so an outage never turns into plaintext.
"""

from __future__ import annotations

import logging
import threading
from typing import Final, Literal

from strongroom.kms.api import Kms
from strongroom.kms.errors import KmsConfigError, UnknownAlias, UnresolvedKek

PLACEHOLDER: Final = "$(topic)"
UnresolvedPolicy = Literal["reject", "passthrough"]

log = logging.getLogger(__name__)


class TemplateKekSelector:
    """Map topic → KEK id through an alias template and the KMS."""

    def __init__(
        self,
        kms: Kms,
        template: str = "strongroom-$(topic)",
        *,
        policy: UnresolvedPolicy = "reject",
    ) -> None:
        leftover = template.replace(PLACEHOLDER, "")
        if "$(" in leftover or not template.strip():
            raise KmsConfigError(
                f"KEK selector template {template!r} is invalid",
                hint=f"the only placeholder is {PLACEHOLDER}, e.g. 'strongroom-{PLACEHOLDER}'",
            )
        if policy not in ("reject", "passthrough"):
            raise KmsConfigError(f"unresolved-KEK policy {policy!r} is not 'reject' or 'passthrough'")
        self.kms = kms
        self.template = template
        self.policy = policy
        self.unresolved_total = 0
        self.unresolved_by_topic: dict[str, int] = {}
        self._lock = threading.Lock()

    def alias_for(self, topic: str) -> str:
        return self.template.replace(PLACEHOLDER, topic)

    def select(self, topic: str) -> str | None:
        """The KEK id for ``topic``; None means "write unencrypted" (passthrough policy only)."""
        alias = self.alias_for(topic)
        try:
            return self.kms.resolve_alias(alias)
        except UnknownAlias:
            if self.policy == "reject":
                raise UnresolvedKek(
                    f"topic {topic!r} has no KEK: alias {alias!r} does not resolve in KMS {self.kms.name!r}"
                ) from None
        with self._lock:
            self.unresolved_total += 1
            first = topic not in self.unresolved_by_topic
            self.unresolved_by_topic[topic] = self.unresolved_by_topic.get(topic, 0) + 1
        if first:
            log.warning(
                "topic %r has no KEK (alias %r does not resolve); its records are written UNENCRYPTED "
                "because the selector policy is 'passthrough'",
                topic,
                alias,
            )
        return None
