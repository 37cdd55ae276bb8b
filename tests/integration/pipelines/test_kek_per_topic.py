"""A KEK per topic, in two real KMSes named in one rules file: OpenBao (Vault Transit) and AWS KMS (moto).

* The encrypt pipeline (JVM engine) wraps topic A's subject keys through ``pii-A`` in OpenBao and topic B's
  through ``pay-B`` in AWS, which the rule lets strongroom create (``missing_kek: create``). A subject in both
  topics has a key under each KEK. The decrypt pipeline opens both topics with the KMSes of the same file.
* ``keys rewrap --kek`` rewraps one KEK's wrapping keys and leaves the other KEK's alone.
* Deleting OpenBao's KEK loses topic A only: ``kek inventory`` and ``recover scan`` name A, not B.
* A rule whose KEK does not exist (``missing_kek: fail``) stops the job before any record is written.
* The client library and the DataFrame API take the same rules through a KeyRouter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from strongroom.cli.main import main
from strongroom.clients.consumer import DecryptingConsumer
from strongroom.clients.producer import EncryptingProducer, ProducerRecord
from strongroom.envelope import SubjectKeyRef, parse
from strongroom.keys.erasure import erase
from strongroom.keys.router import KeyRouter
from strongroom.keys.table import KeyTable
from strongroom.kms.admin.vault import VaultKekAdmin
from strongroom.kms.catalog import KmsCatalog, KmsGroup
from strongroom.kms.errors import UnresolvedKek
from strongroom.policies import Engine
from strongroom.rules import EncryptionRules
from strongroom.spark.dataframes import encrypt_dataframe
from strongroom.spark.jobs.decrypt import DecryptJob
from strongroom.spark.jobs.encrypt import EncryptJob

pytestmark = pytest.mark.integration


def _rules_file(tmp_path: Path, openbao: Any, moto_kms: Any, rules: list[dict[str, Any]]) -> Path:
    document = {
        "kms": {
            "bao": {"provider": "vault", "address": openbao.address, "token": openbao.token},
            "aws-eu": {
                "provider": "aws", "endpoint_url": moto_kms.endpoint_url, "region": moto_kms.region,
                "access_key_id": "testing", "secret_access_key": "testing",
            },
        },
        "rules": rules,
    }  # fmt: skip
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _two_kek_rules(a: str, b: str) -> list[dict[str, Any]]:
    return [
        {"topic": a, "kek": "pii-$(topic)", "kms": "bao"},
        {"topic": b, "kek": "pay-$(topic)", "kms": "aws-eu", "missing_kek": "create"},
    ]


def _cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(["--output", "json", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def test_each_topic_is_wrapped_by_its_own_kek_and_a_deleted_kek_loses_only_its_topic(
    spark: SparkSession, pipeline_env: Any, openbao: Any, moto_kms: Any, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    env = pipeline_env
    topic_a, topic_b = env.new_topic(partitions=2), env.new_topic(partitions=2)
    events_a = env.produce_events(topic_a, 40, customers=6)
    events_b = env.produce_events(topic_b, 30, customers=6)  # the same six subjects in both topics
    bao_admin = VaultKekAdmin(openbao.client())
    bao_admin.create_kek(f"pii-{topic_a}")  # B's KEK does not exist yet: its rule says create
    path = _rules_file(tmp_path, openbao, moto_kms, _two_kek_rules(topic_a, topic_b))
    catalog = KmsCatalog.load(path)
    rules = EncryptionRules.load(path)
    assert "token" not in rules.model_dump_json()  # KMS settings never travel with the rules

    settings = env.settings(rules, "enc", kms={}, kmses=catalog.configs(), engine=Engine.JVM)
    job = EncryptJob(spark, settings)
    assert job.keks[topic_a] == f"bao:pii-{topic_a}"
    assert job.keks[topic_b].startswith("aws-eu:")
    result = env.run(job)
    assert result.records == {"ok": 70}
    assert set(result.keys["routes"]) == {f"bao:pii-{topic_a}", f"aws-eu:pay-{topic_b}"}
    assert result.keys["created"] == 12, "six subjects, a key under each topic's KEK"

    kmses = KmsGroup(catalog.build(cache=False).values())
    with KeyTable(env.client, kmses, topic=env.keys_topic, register=False).open() as table:
        table.wait_caught_up(60)
        wrapping = {wk.wk_id: wk.edek.kek_ref for wk in table.store.wrapping_keys()}
        assert {ref.split(":")[0] for ref in wrapping.values()} == {"bao", "aws-eu"}
        for subject in {e["customer_id"] for e in events_a}:
            keks = {wrapping[k.wk_id] for k in table.subject_states([subject])[subject].keys}
            assert len(keks) == 2, f"{subject} has a key under each topic's KEK"

    decrypt = env.settings({"rules": [{"topic": f"{topic_a}.enc"}, {"topic": f"{topic_b}.enc"}]}, "dec",
                           kms={}, kmses=catalog.configs())  # fmt: skip
    opened = env.run(DecryptJob(spark, decrypt))
    assert opened.records == {"ok": 70}
    ids = {json.loads(m.value())["event_id"] for t in (topic_a, topic_b) for m in env.read(f"{t}.decrypted")}
    assert ids == {e["event_id"] for e in events_a + events_b}

    rewrap = ["keys", "rewrap", "-b", env.bootstrap, "--keys-topic", env.keys_topic, "--kms-config", str(path)]
    code, _, err = _cli(capsys, rewrap)
    assert code != 0
    assert "names several KMSes" in err
    code, done, err = _cli(capsys, [*rewrap, "--kek", job.keks[topic_b]])  # B's KEK only: A's stays as it is
    assert code == 0, err
    assert (done["wrapping_keys"], done["other_keks"], done["failed"]) == (1, 1, [])

    bao_admin.delete_kek(f"pii-{topic_a}")
    common = ["-b", env.bootstrap, "--kms-config", str(path), "--keys-topic", env.keys_topic, "--kms-attempts", "2"]
    code, report, err = _cli(capsys, ["kek", "inventory", "--topic", f"{topic_a}.enc", "--topic", f"{topic_b}.enc",
                                      *common])  # fmt: skip
    assert code == 0, err
    reported = {k["kek"]: k for k in report["keks"]}
    assert reported[f"bao:pii-{topic_a}"]["state"] == "missing"
    assert [k for k, v in reported.items() if v["state"] != "enabled"] == [f"bao:pii-{topic_a}"]
    lost_where = json.dumps(reported[f"bao:pii-{topic_a}"]["partitions"])
    assert f"{topic_a}.enc" in lost_where
    assert f"{topic_b}.enc" not in lost_where, "the deleted KEK is named for its own topic only"
    by_topic = {t["topic"]: t for t in report["topics"]}
    needs = {
        topic: {d["label"].split("@")[0] for p in t["partitions"] for d in p["dependencies"]}
        for topic, t in by_topic.items()
    }
    assert needs[f"{topic_a}.enc"] == {f"bao:pii-{topic_a}"}
    assert all(label.startswith("aws-eu:") for label in needs[f"{topic_b}.enc"])

    code, plan, err = _cli(capsys, ["recover", "scan", "--topic", f"{topic_a}.enc", *common,
                                    "--plan-out", str(tmp_path / "a.json")])  # fmt: skip
    assert code in (4, 5), err
    assert sum(p["lost"] for p in plan["partitions"]) == 40
    code, plan, err = _cli(capsys, ["recover", "scan", "--topic", f"{topic_b}.enc", *common,
                                    "--plan-out", str(tmp_path / "b.json")])  # fmt: skip
    assert code == 0, err
    assert sum(p["lost"] for p in plan["partitions"]) == 0
    kmses.close()


def test_a_topic_whose_kek_is_missing_stops_before_anything_is_written(
    spark: SparkSession, pipeline_env: Any, openbao: Any, moto_kms: Any, tmp_path: Path
) -> None:
    env = pipeline_env
    topic = env.new_topic(partitions=1)
    env.produce_events(topic, 5)
    path = _rules_file(tmp_path, openbao, moto_kms, [{"topic": topic, "kek": "absent-$(topic)", "kms": "bao"}])
    settings = env.settings(EncryptionRules.load(path), "missing", kms={}, kmses=KmsCatalog.load(path).configs())
    with pytest.raises(UnresolvedKek, match=rf"topic '{topic}' has no KEK: alias 'absent-{topic}'.*'bao'") as caught:
        EncryptJob(spark, settings)
    assert "missing_kek: create" in (caught.value.hint or "")


def test_the_client_library_and_the_dataframe_api_route_topics_to_their_keks(
    spark: SparkSession, pipeline_env: Any, openbao: Any, moto_kms: Any, tmp_path: Path
) -> None:
    env = pipeline_env
    topic_a, topic_b = env.new_topic(partitions=1), env.new_topic(partitions=1)
    VaultKekAdmin(openbao.client()).create_kek(f"pii-{topic_a}")
    path = _rules_file(tmp_path, openbao, moto_kms, _two_kek_rules(topic_a, topic_b))
    rules, catalog = EncryptionRules.load(path), KmsCatalog.load(path)
    kmses = catalog.build()
    with KeyRouter(env.client, None, rules=rules, kmses=kmses, topic=env.keys_topic) as router:
        producer = EncryptingProducer(env.client, rules, router)
        records = [ProducerRecord(t, key=f"c{i % 3}".encode(), value=json.dumps({"n": i, "t": t}).encode())
                   for i in range(12) for t in (topic_a, topic_b)]  # fmt: skip
        producer.produce_batch(records)
        producer.flush(30)
        producer.close()
        stats = router.stats()
        assert set(stats["routes"]) == {f"bao:pii-{topic_a}", f"aws-eu:pay-{topic_b}"}
        assert all(route["created"] == 3 for route in stats["routes"].values())

        frame = spark.read.format("kafka").option("kafka.bootstrap.servers", env.bootstrap).option(
            "subscribe", f"{topic_a},{topic_b}").load()  # fmt: skip
        env.produce_events(topic_a, 4, customers=2)
        env.produce_events(topic_b, 4, customers=2)
        sealed = encrypt_dataframe(frame, rules, keys=router).collect()
        assert len(sealed) == 4 + 4
    group = KmsGroup(kmses.values())
    with KeyTable(env.client, group, topic=env.keys_topic, register=False).open() as table:
        table.wait_caught_up(60)
        kek_of_wk = {wk.wk_id: wk.edek.provider for wk in table.store.wrapping_keys()}
        assert set(kek_of_wk.values()) == {"bao", "aws-eu"}
        for row in sealed:  # the DataFrame API sealed each topic's records with a key under that topic's KEK
            ref = parse(bytes(row["value"])).key_ref
            assert isinstance(ref, SubjectKeyRef)
            stored = table.store.key(ref.key_id)
            assert stored is not None
            assert kek_of_wk[stored.wk_id] == ("bao" if row["topic"] == f"{topic_a}.enc" else "aws-eu")
        outputs = EncryptionRules.parse_obj_or_fail({"rules": [{"topic": f"{t}.enc"} for t in (topic_a, topic_b)]})
        consumer = DecryptingConsumer(env.client, outputs, table, group_id="kek-per-topic")
        consumer.subscribe([f"{topic_a}.enc", f"{topic_b}.enc"])
        opened = []
        for _ in range(40):
            opened += [m for m in consumer.consume(100, timeout=0.5) if m.value is not None]
            if len(opened) >= 24:
                break
        consumer.close()
        assert sorted(json.loads(m.value or b"")["n"] for m in opened) == sorted(list(range(12)) * 2)

        # the Python engine asks the key service per source topic, as the JVM engine does
        py_rules = EncryptionRules.parse_obj_or_fail(
            {"rules": [{**rule, "output_topic": "$(topic).py"} for rule in _two_kek_rules(topic_a, topic_b)]}
        )
        py = env.settings(py_rules, "py", kms={}, kmses=catalog.configs(), engine=Engine.PYTHON)
        assert env.run(EncryptJob(spark, py)).records == {"ok": 8}
        table.wait_caught_up(60)
        for topic, kms_name in ((topic_a, "bao"), (topic_b, "aws-eu")):
            for msg in env.read(f"{topic}.py"):
                ref = parse(msg.value()).key_ref
                assert isinstance(ref, SubjectKeyRef)
                stored = table.store.key(ref.key_id)
                assert stored is not None
                assert table.store.wrapping_key(stored.wk_id).edek.provider == kms_name  # type: ignore[union-attr]
        erase(env.client, ["c1"], reason="test", topic=env.keys_topic)
        table.wait_caught_up(60)
        assert table.subject_states(["c1"])["c1"].keys == (), "erasure removes the subject's keys under every KEK"
    group.close()
