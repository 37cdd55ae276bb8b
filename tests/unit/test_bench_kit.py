"""The pure parts of the benchmarks' shared module (bench/benchkit.py): statistics, verification of a
round's output, CPU accounting per process kind and the RESULT line."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchkit", BENCH / "benchkit.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("benchkit", module)
    spec.loader.exec_module(module)
    return module


bk = _load()


def digest_of(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]) -> object:
    digest = bk.TopicDigest()
    for key, value, headers, ts in records:
        digest.add(key, value, headers, ts)
    return digest


def record(i: int, ts: int = 1000, value: bytes | None = None) -> tuple[bytes, bytes, list[tuple[str, bytes]], int]:
    return (f"k{i}".encode(), value or f"v{i}".encode(), [(bk.SEQ_HEADER, str(i).encode()), ("h", b"x")], ts + i)


SOURCE = [record(i) for i in range(5)]


def test_summary_reports_median_and_spread() -> None:
    summary = bk.summarize([0.5, 0.4, 0.6])
    assert summary.median == 0.5
    assert (summary.low, summary.high) == (0.4, 0.6)
    assert summary.spread == pytest.approx(0.4)


def test_summary_refuses_no_rounds() -> None:
    with pytest.raises(ValueError, match="no rounds"):
        bk.summarize([])


def test_result_line_starts_with_name_and_median_ratio() -> None:
    line = bk.result_line("encrypt-vs-copy", bk.summarize([0.91, 0.95, 0.93]), target=0.9, rps=123456.7, engine="jvm")
    assert line.startswith("RESULT encrypt-vs-copy ratio=0.93 ")
    assert "min=0.91 max=0.95 spread=0.04 rounds=3 target=0.90 rps=123457 engine=jvm" in line


def test_exact_copy_in_another_order_verifies() -> None:
    copy = list(reversed(SOURCE))
    assert bk.verify("copy", digest_of(SOURCE), digest_of(copy), bk.Check.CONTENT_AND_TIME) == []


def test_duplicate_is_found_even_when_a_record_is_missing() -> None:
    output = [*SOURCE[:4], SOURCE[0]]  # same count: one lost, one written twice
    problems = bk.verify("encrypt", digest_of(SOURCE), digest_of(output), bk.Check.COUNT)
    assert any("1 duplicate" in p for p in problems)
    assert any("1 source records missing" in p for p in problems)


def test_changed_value_fails_content_check_but_not_count_check() -> None:
    output = [*SOURCE[:4], record(4, value=b"changed")]
    assert bk.verify("x", digest_of(SOURCE), digest_of(output), bk.Check.COUNT) == []
    assert bk.verify("x", digest_of(SOURCE), digest_of(output), bk.Check.CONTENT)


def test_timestamps_count_only_where_the_sink_can_keep_them() -> None:
    output = [record(i, ts=5000) for i in range(5)]
    assert bk.verify("copy", digest_of(SOURCE), digest_of(output), bk.Check.CONTENT) == []
    problems = bk.verify("decrypt", digest_of(SOURCE), digest_of(output), bk.Check.CONTENT_AND_TIME)
    assert problems
    assert "timestamps" in problems[0]


def test_record_hash_tells_none_from_empty_and_header_order() -> None:
    assert bk.record_hash(None, b"v", [], 1) != bk.record_hash(b"", b"v", [], 1)
    assert bk.record_hash(b"k", b"v", [("a", b"1"), ("b", b"2")], 1) != bk.record_hash(
        b"k", b"v", [("b", b"2"), ("a", b"1")], 1
    )


def test_canonical_json_ignores_key_order_and_spacing() -> None:
    assert bk.canonical_json(b'{"b": 1, "a": [1, 2]}') == bk.canonical_json(b'{"a":[1,2],"b":1}')


@pytest.mark.parametrize(
    ("argv", "parent", "kind"),
    [
        (["/usr/lib/jvm/bin/java", "-cp", "x", "kafka.Kafka", "server.properties"], "other", "broker"),
        (["/usr/lib/jvm/bin/java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit"], "other", "spark-jvm"),
        (["python3", "-m", "pyspark.daemon"], "spark-jvm", "python-workers"),
        (["python3", "-m", "pyspark.worker"], "python-workers", "python-workers"),
        (["/bin/bash", "spark-submit"], "driver-python", "other"),
    ],
)
def test_processes_are_classified_by_command_and_parent(argv: list[str], parent: str, kind: str) -> None:
    assert bk.classify(7, 1, argv, bk.ProcessKind(parent)) == bk.ProcessKind(kind)


def test_the_root_is_the_python_driver() -> None:
    assert bk.classify(1, 1, ["python", "bench/pipeline_bench.py"], None) == bk.ProcessKind.DRIVER_PYTHON


def test_stat_cpu_includes_reaped_children_and_survives_odd_names() -> None:
    # pid (comm) state ppid ... utime stime cutime cstime (fields 14-17 of proc(5))
    stat = "42 (java (x) y) S 7 42 42 0 -1 4194304 100 0 0 0 300 100 50 50 20 0 1 0"
    assert bk.stat_cpu_seconds(stat, 100) == (7, 5.0)


_BUSY_DRIVER = """
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("benchkit", sys.argv[1])
bk = importlib.util.module_from_spec(spec)
sys.modules["benchkit"] = bk
spec.loader.exec_module(bk)
before = bk.cpu_by_kind()
start = time.process_time()
while time.process_time() - start < 0.3:
    pass
delta = bk.cpu_delta(before, bk.cpu_by_kind())
print(json.dumps({str(kind): seconds for kind, seconds in delta.items()}))
"""


def test_cpu_by_kind_counts_this_process_as_the_driver() -> None:
    """Measured in a fresh interpreter with no child processes: pytest's own tree may hold the session's
    Kafka brokers, whose CPU is rightly counted as the broker's."""
    done = subprocess.run(
        [sys.executable, "-c", _BUSY_DRIVER, str(BENCH / "benchkit.py")], capture_output=True, text=True, check=True
    )
    delta = json.loads(done.stdout)
    assert delta[str(bk.ProcessKind.DRIVER_PYTHON)] >= 0.2
    assert delta.get(str(bk.ProcessKind.BROKER), 0) == 0
