"""A KEK per topic: each topic's subject keys are wrapped through the KEK its rule names.

A rule names a KEK alias template (``kek: "pii-$(topic)"``) and, optionally, a KMS from the rules file's
``kms:`` section (:mod:`strongroom.kms.catalog`); a rule that names neither uses the command's KMS and
``--kek-alias``. Each (KMS, alias) is a :class:`KekRoute` with its own
:class:`~strongroom.keys.manager.KeyManager` — so its own wrapping keys — and its own
:class:`~strongroom.keys.cache.KeyCache`. All of them share one :class:`~strongroom.keys.table.KeyTable`,
which unwraps each wrapping key with the KMS its EDEK names.

What follows from it:

* A subject that appears in two topics under two KEKs has a key under each; a writer seals only with a
  key under its topic's KEK. Deleting one KEK loses exactly the topics routed to it, which
  ``kek inventory`` and ``recover scan`` then name.
* Erasure is per subject, not per KEK: it removes the subject's keys under every KEK.
* A KEK that does not exist stops the writer before anything is sealed (``missing_kek: fail``, default), or
  is created in its KMS (``missing_kek: create``). Routes are checked when first used, and
  :meth:`KeyRouter.check` checks a list of topics up front.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from strongroom.errors import ConfigError
from strongroom.kafka.config import ClientConfig
from strongroom.keys.cache import KeyCache
from strongroom.keys.erasure_feed import ErasureNotice
from strongroom.keys.manager import DEFAULT_KEK_ALIAS, KeyManager, KeyOrDecision, PostErasurePolicy
from strongroom.keys.table import KeyTable
from strongroom.keys.topic_config import KEYS_TOPIC_DEFAULT
from strongroom.keys.usage import SubjectKeyLimits
from strongroom.keys.wrapping import WrappingKeyPolicy
from strongroom.kms.api import Kms
from strongroom.metrics import KeyTableSample
from strongroom.policies import MissingKek
from strongroom.rules import EncryptionRules


@dataclass(frozen=True)
class KekRoute:
    """Where a topic's keys are wrapped: a KMS (its provider name) and a KEK alias in it."""

    kms: str
    alias: str
    missing: MissingKek = MissingKek.FAIL

    def __str__(self) -> str:
        return f"{self.kms}:{self.alias}"


class KeyRouter:
    """topic → the key cache of its KEK route, over one key table. Thread-safe.

    ``kms`` is the command's KMS (rules that name none); ``kmses`` are the named KMSes rules may name.
    ``rules=None`` routes every topic to ``kms`` and ``kek_alias`` (a single-KEK writer).
    """

    def __init__(
        self,
        client: ClientConfig | None,
        kms: Kms | None,
        *,
        rules: EncryptionRules | None = None,
        kmses: Mapping[str, Kms] | None = None,
        kek_alias: str = DEFAULT_KEK_ALIAS,
        missing_kek: MissingKek = MissingKek.FAIL,
        topic: str = KEYS_TOPIC_DEFAULT,
        policy: PostErasurePolicy | str = PostErasurePolicy.UNREADABLE,
        wrapping: WrappingKeyPolicy | None = None,
        limits: SubjectKeyLimits | None = None,
        table: KeyTable | None = None,
        table_options: Mapping[str, Any] | None = None,
        cache_capacity: int = 100_000,
        cache_ttl_s: float = 30.0,
        timeout: float = 60.0,
    ) -> None:
        self.client = client
        self.rules = rules
        self.kek_alias = kek_alias
        self.missing_kek = MissingKek(missing_kek)
        self.kmses = dict(kmses or {})
        self.default_kms = kms
        providers = kms_by_provider(kms, self.kmses)
        self._check_rules(rules)
        self._manager_options: dict[str, Any] = {
            "topic": topic, "policy": policy, "wrapping": wrapping, "limits": limits, "timeout": timeout
        }  # fmt: skip
        self._cache_capacity, self._cache_ttl_s = cache_capacity, cache_ttl_s
        self._owns_table = table is None
        if table is None:
            if client is None:
                raise ConfigError("a key router without a key table needs the Kafka client settings")
            table = KeyTable(client, providers, topic=topic, **dict(table_options or {})).open()
        self.table = table
        self._caches: dict[KekRoute, KeyCache] = {}
        #: The caches this router made (they do not listen to the table themselves).
        self._forward: list[KeyCache] = []
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        # One listener for every route, registered now: a cache made later still drops an erased key
        # before any listener registered after the router (the pipelines' erasure feed) hears of it.
        table.add_erasure_listener(self._on_erasure)

    @classmethod
    def single(cls, manager: KeyManager, cache: KeyCache | None = None) -> KeyRouter:
        """A rule-less router over an existing manager (and cache): every topic uses its KEK. A cache passed
        in keeps its own erasure listener."""
        router = cls(None, manager.kms, kek_alias=manager.kek_alias, missing_kek=manager.kek.missing,
                     table=manager.table)  # fmt: skip
        if cache is None:
            cache = KeyCache(manager, listen=False)
            router._forward.append(cache)
        router._caches[router.route_for("")] = cache
        return router

    # ------------------------------------------------------------------ routes
    def route_for(self, topic: str) -> KekRoute:
        """The KMS and KEK alias that wrap ``topic``'s keys (ConfigError naming the topic when none can)."""
        if self.rules is None:
            kms = self._default_kms(topic)
            return KekRoute(kms.name, self.kek_alias, self.missing_kek)
        rule = self.rules.rule_for(topic)
        kms = self._default_kms(topic) if rule.kms is None else self.kmses[rule.kms]
        return KekRoute(kms.name, rule.kek_alias_for(topic, self.kek_alias), rule.missing_kek)

    def cache_for(self, topic: str) -> KeyCache:
        """The key cache of ``topic``'s route, its manager built (and its KEK resolved) on first use."""
        route = self.route_for(topic)
        with self._lock:
            cache = self._caches.get(route)
        if cache is not None:
            return cache
        # Built outside self._lock: a new manager waits for the key table's reader, whose erasure
        # notices (self._on_erasure) take self._lock.
        with self._open_lock:
            with self._lock:
                cache = self._caches.get(route)
            if cache is None:
                cache = self._open(route, topic)
                with self._lock:
                    self._caches[route] = cache
                    self._forward.append(cache)
        return cache

    def check(self, topics: Iterable[str]) -> dict[str, str]:
        """Resolve (or create, per the rules) the KEK of every topic now: ``{topic: "kms:kek-id"}``.
        Raises :class:`~strongroom.kms.errors.UnresolvedKek` naming the first topic without one."""
        return {topic: f"{self.route_for(topic).kms}:{self.cache_for(topic).manager.kek_id()}" for topic in topics}

    def _open(self, route: KekRoute, topic: str) -> KeyCache:
        kms = self._kms_named(route.kms)
        if self.client is None:
            raise ConfigError(f"no key manager for {route} (this router was built over one manager)")
        manager = KeyManager(
            self.client, kms, kek_alias=route.alias, missing_kek=route.missing, kek_owner=f"topic {topic!r}",
            table=self.table, **self._manager_options,
        )  # fmt: skip
        try:
            manager.kek_id()  # fail (or create) before the first record is sealed
        except BaseException:
            manager.close()
            raise
        return KeyCache(manager, capacity=self._cache_capacity, ttl_s=self._cache_ttl_s, listen=False)

    def _on_erasure(self, notice: ErasureNotice) -> None:
        with self._lock:
            caches = list(self._forward)
        for cache in caches:
            cache.on_erasure(notice)

    def _default_kms(self, topic: str) -> Kms:
        if self.default_kms is None:
            raise ConfigError(
                f"the rule for topic {topic!r} names no KMS and the command has none",
                hint="give the rule `kms: <name>` from the rules file's kms: section, or pass --kms-config",
            )
        return self.default_kms

    def _kms_named(self, provider: str) -> Kms:
        for kms in (self.default_kms, *self.kmses.values()):
            if kms is not None and kms.name == provider:
                return kms
        raise ConfigError(f"no KMS named {provider!r}")  # routes only name KMSes this router holds

    def _check_rules(self, rules: EncryptionRules | None) -> None:
        unknown = sorted((rules.kms_names() if rules is not None else set()) - set(self.kmses))
        if unknown:
            raise ConfigError(
                f"the rules name KMS {', '.join(map(repr, unknown))}, which the rules file's kms: section "
                f"does not define (it defines: {', '.join(sorted(self.kmses)) or 'none'})",
                hint="add it under kms: in the rules file, or fix the rule's kms:",
            )

    # ------------------------------------------------------------------ keys
    def get_or_create(
        self,
        subjects: Iterable[str],
        *,
        topic: str | None = None,
        seals: Mapping[str, int] | None = None,
        kms_wait_s: float = 0.0,
    ) -> dict[str, KeyOrDecision]:
        """Keys for ``subjects`` of ``topic`` (:meth:`KeyCache.get_or_create` of its route). ``topic=None``
        only on a single-route router."""
        return self._cache(topic).get_or_create(subjects, seals=seals, kms_wait_s=kms_wait_s)

    def get_or_create_by_topic(
        self,
        wanted: Mapping[str, Iterable[str]],
        *,
        seals: Mapping[tuple[str, str], int] | None = None,
        kms_wait_s: float = 0.0,
    ) -> dict[tuple[str, str], KeyOrDecision]:
        """Keys for subjects of several topics: ``{(topic, subject): key}``, one request per KEK route.
        ``seals[(topic, subject)]`` is how many seals the subject's key makes for that topic (one per
        subject when not given), charged to its usage limit (:meth:`KeyCache.get_or_create`)."""
        by_route: dict[KekRoute, tuple[str, list[str], Counter[str]]] = {}
        topics_of: dict[KekRoute, list[str]] = {}
        for topic, subjects in wanted.items():
            route = self.route_for(topic)
            entry = by_route.setdefault(route, (topic, [], Counter()))
            unique = list(dict.fromkeys(subjects))
            entry[1].extend(unique)
            if seals is not None:
                for subject in unique:
                    entry[2][subject] += seals.get((topic, subject), 0)
            topics_of.setdefault(route, []).append(topic)
        keys: dict[tuple[str, str], KeyOrDecision] = {}
        for route, (first_topic, subjects, counts) in by_route.items():
            charged = dict(counts) if seals is not None else None
            found = self.cache_for(first_topic).get_or_create(subjects, seals=charged, kms_wait_s=kms_wait_s)
            for topic in topics_of[route]:
                for subject in wanted[topic]:
                    keys[(topic, subject)] = found[subject]
        return keys

    def _cache(self, topic: str | None) -> KeyCache:
        if topic is not None:
            return self.cache_for(topic)
        with self._lock:
            if len(self._caches) == 1:
                return next(iter(self._caches.values()))
        if self.rules is None:
            return self.cache_for("")
        raise ConfigError("keys were asked for without a topic, but the rules route topics to several KEKs")

    # ------------------------------------------------------------------ figures and life cycle
    @property
    def caches(self) -> list[KeyCache]:
        with self._lock:
            return list(self._caches.values())

    def stats(self) -> dict[str, Any]:
        """The single route's figures (as a :class:`KeyCache`'s), or their sums with each route's own under
        ``routes``."""
        caches = self._caches_by_route()
        if len(caches) == 1:
            return next(iter(caches.values())).stats()
        routes = {str(route): cache.stats() for route, cache in caches.items()}
        totals: dict[str, int] = {}
        for stats in routes.values():
            for name, value in stats.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    totals[name] = totals.get(name, 0) + value
        return {**totals, "routes": routes}

    def metric_sample(self) -> KeyTableSample:
        """The shared key table's figures, with the keys every route created."""
        created = sum(cache.manager.counters["created"] for cache in self.caches)
        return replace(self.table.metric_sample(), created=created)

    def _caches_by_route(self) -> dict[KekRoute, KeyCache]:
        with self._lock:
            return dict(self._caches)

    def close(self) -> None:
        for cache in self.caches:
            cache.close()
            cache.manager.close()
        if self._owns_table:
            self.table.close()

    def __enter__(self) -> KeyRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def kms_by_provider(kms: Kms | None, kmses: Mapping[str, Kms]) -> dict[str, Kms]:
    """The key table's KMSes by the provider name their EDEKs carry; two KMSes may not share one."""
    providers: dict[str, Kms] = {}
    for label, candidate in (("the command's KMS", kms), *((f"kms {name!r}", k) for name, k in kmses.items())):
        if candidate is None:
            continue
        other = providers.get(candidate.name)
        if other is not None and other is not candidate:
            raise ConfigError(
                f"{label} has provider name {candidate.name!r}, which another KMS already uses: EDEKs name "
                "their KMS by it, so each KMS needs its own",
                hint="give each KMS a distinct name: in its settings",
            )
        providers[candidate.name] = candidate
    return providers
