"""KEK selection per topic: a template turns a topic name into a KEK alias the KMS resolves.

``TemplateKekSelector(kms, "pii-$(topic)")`` picks alias ``pii-orders`` for topic ``orders``. When the
alias does not resolve, the rule's :class:`~strongroom.policies.MissingKek` decides: ``fail`` (default)
raises :class:`~strongroom.kms.errors.UnresolvedKek` naming topic, alias and KMS; ``create`` creates the
KEK in that KMS (:meth:`~strongroom.kms.api.Kms.create_kek`; a KMS that cannot refuses with
:class:`~strongroom.kms.errors.KekCreationRefused`). There is no "write it unencrypted" choice.

Only a KMS *answer* ("no such alias") counts as missing: if the KMS is unreachable or denies access,
the error propagates under every policy, and nothing is created on a guess.
"""

from __future__ import annotations

import logging
from typing import Final

from strongroom.kms.api import Kms
from strongroom.kms.errors import KmsConfigError, UnknownAlias, UnresolvedKek
from strongroom.policies import MissingKek

PLACEHOLDER: Final = "$(topic)"

log = logging.getLogger(__name__)


def check_template(template: str) -> str:
    """``template`` when ``$(topic)`` is its only placeholder and it names something; else KmsConfigError."""
    leftover = template.replace(PLACEHOLDER, "")
    if "$(" in leftover or not template.strip():
        raise KmsConfigError(
            f"KEK template {template!r} is invalid",
            hint=f"the only placeholder is {PLACEHOLDER}, e.g. 'pii-{PLACEHOLDER}'",
        )
    return template


class TemplateKekSelector:
    """Map topic → KEK id through an alias template and one KMS."""

    def __init__(
        self, kms: Kms, template: str = "strongroom-$(topic)", *, missing: MissingKek = MissingKek.FAIL
    ) -> None:
        self.kms = kms
        self.template = check_template(template)
        self.missing = MissingKek(missing)
        self.created: list[str] = []

    def alias_for(self, topic: str) -> str:
        return self.template.replace(PLACEHOLDER, topic)

    def select(self, topic: str) -> str:
        """The KEK id for ``topic``, creating the KEK first under ``missing: create``."""
        return self.resolve(self.alias_for(topic), f"topic {topic!r}")

    def resolve(self, alias: str, owner: str) -> str:
        """The KEK id ``alias`` names for ``owner`` (named in messages), creating it under ``missing: create``."""
        try:
            return self.kms.resolve_alias(alias)
        except UnknownAlias:
            if self.missing is MissingKek.FAIL:
                raise UnresolvedKek(
                    f"{owner} has no KEK: alias {alias!r} does not resolve in KMS {self.kms.name!r}"
                ) from None
        kek_id = self.kms.create_kek(alias)
        self.created.append(alias)
        log.warning("created KEK %s:%s (alias %r) for %s (the rule's missing_kek is 'create')",
                    self.kms.name, kek_id, alias, owner)  # fmt: skip
        return self.kms.resolve_alias(alias)
