"""Which Spark settings strongroom adds per master, and when a cluster's channel is too weak for keys (issue 11)."""

from __future__ import annotations

import pytest

from strongroom.spark.keyservice import SECURE_CHANNEL_SETTINGS, channel_problem
from strongroom.spark.session import LOCAL_DEFAULTS, is_local_master, session_defaults

LOCAL_ONLY = ("spark.driver.host", "spark.driver.bindAddress", "spark.driver.memory", "spark.sql.shuffle.partitions",
              "spark.default.parallelism")  # fmt: skip


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_local_masters_get_the_laptop_defaults(master: str) -> None:
    assert is_local_master(master)
    assert session_defaults(master) == LOCAL_DEFAULTS


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "k8s://https://api:6443", "mesos://m:5050"])
def test_a_cluster_master_gets_none_of_the_local_only_settings(master: str) -> None:
    assert not is_local_master(master)
    defaults = session_defaults(master)
    assert not set(LOCAL_ONLY) & set(defaults)
    assert defaults["spark.sql.session.timeZone"] == "UTC"


def test_the_key_channel_must_be_authenticated_and_encrypted_on_a_cluster() -> None:
    assert channel_problem("local[2]", {}) is None
    secure = dict.fromkeys(SECURE_CHANNEL_SETTINGS, "true")
    assert channel_problem("spark://h:7077", secure) is None
    problem = channel_problem("spark://h:7077", {})
    assert problem is not None
    assert "spark.authenticate and spark.network.crypto.enabled are not set" in problem
    only_auth = channel_problem("yarn", {"spark.authenticate": "true"})
    assert only_auth is not None
    assert "spark.network.crypto.enabled is not set" in only_auth
