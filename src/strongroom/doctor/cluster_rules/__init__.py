"""Cluster rules: pure functions over a :class:`~strongroom.doctor.snapshot.ClusterSnapshot`.

Importing this package registers every rule in :data:`CLUSTER_RULES`, in the order below.
"""

from __future__ import annotations

# The import order is the order rules run and are listed in.
# isort: off
from strongroom.doctor.cluster_rules import brokers, replication, health, capacity, internal, keys

# isort: on
from strongroom.doctor.cluster_rules.base import (
    CLUSTER_RULES,
    KEYS_TOPIC_SUFFIX,
    ClusterCheckSettings,
    ClusterRule,
)

__all__ = [
    "CLUSTER_RULES",
    "KEYS_TOPIC_SUFFIX",
    "ClusterCheckSettings",
    "ClusterRule",
    "brokers",
    "capacity",
    "health",
    "internal",
    "keys",
    "replication",
]
