"""Doctor: cluster, topic and client configuration checks from hard-won operations experience.

Two registries of rules, each rule a pure function with a stable id and a severity:

* cluster rules (:data:`~strongroom.doctor.cluster_rules.CLUSTER_RULES`) over a
  :class:`~strongroom.doctor.snapshot.ClusterSnapshot` collected once through the admin API;
* client rules (:data:`~strongroom.doctor.client_rules.CLIENT_RULES`) over a librdkafka
  configuration that the installed librdkafka has validated property by property.

Every finding names its evidence, the fix (an exact command or property) and the operational reason.
See docs/doctor.md for the rules, severities and exit codes.
"""

from __future__ import annotations

from strongroom.doctor.client_rules import CLIENT_RULES
from strongroom.doctor.cluster_rules import CLUSTER_RULES, ClusterCheckSettings
from strongroom.doctor.model import Finding, Rule, Severity
from strongroom.doctor.report import EXIT_FINDINGS, EXIT_OK, DoctorReport
from strongroom.doctor.run import check_client, check_cluster, check_snapshot, read_client_properties
from strongroom.doctor.snapshot import Broker, ClusterSnapshot, ConfigValue, Partition, Topic

__all__ = [
    "CLIENT_RULES",
    "CLUSTER_RULES",
    "EXIT_FINDINGS",
    "EXIT_OK",
    "Broker",
    "ClusterCheckSettings",
    "ClusterSnapshot",
    "ConfigValue",
    "DoctorReport",
    "Finding",
    "Partition",
    "Rule",
    "Severity",
    "Topic",
    "check_client",
    "check_cluster",
    "check_snapshot",
    "read_client_properties",
]
