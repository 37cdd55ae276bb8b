"""How long the local stack takes to start: 1- and 3-broker Kafka, OpenBao, moto, a Spark session.

Usage: .venv/bin/python bench/stack_startup.py [--repeat N]
Prints each figure (median of N runs) and, last, ``RESULT stack-startup ratio=<3-broker/1-broker> ...``.
The ratio says what the dedicated controller and two more JVMs cost relative to the combined-mode
single broker started in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from strongroom.testing.kafka_cluster import KafkaCluster
from strongroom.testing.moto_server import MotoServer
from strongroom.testing.openbao import OpenBaoServer


def timed(start, stop) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    obj = start()
    elapsed = time.perf_counter() - t0
    stop(obj)
    return elapsed


def spark_session_seconds() -> float:
    """A fresh interpreter each time: a SparkSession is per-process and the JVM start is the cost."""
    code = (
        "import time; t=time.perf_counter(); from strongroom.spark.session import build_spark_session; "
        "s=build_spark_session(app_name='bench'); print(time.perf_counter()-t); s.stop()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"kafka-1": [], "kafka-3": [], "openbao": [], "moto": [], "spark": []}
    for _ in range(args.repeat):
        figures["kafka-1"].append(timed(lambda: KafkaCluster(brokers=1).start(), lambda c: c.stop()))
        figures["kafka-3"].append(timed(lambda: KafkaCluster(brokers=3).start(), lambda c: c.stop()))
        figures["openbao"].append(timed(lambda: OpenBaoServer().start(), lambda s: s.stop()))
        figures["moto"].append(timed(lambda: MotoServer().start(), lambda s: s.stop()))
        figures["spark"].append(spark_session_seconds())
    med = {k: statistics.median(v) for k, v in figures.items()}
    for name, value in med.items():
        print(
            f"{name:8} start {value:6.2f} s (median of {args.repeat}: {', '.join(f'{x:.2f}' for x in figures[name])})"
        )
    print(
        f"RESULT stack-startup ratio={med['kafka-3'] / med['kafka-1']:.2f} kafka1={med['kafka-1']:.1f}s "
        f"kafka3={med['kafka-3']:.1f}s openbao={med['openbao']:.2f}s moto={med['moto']:.2f}s spark={med['spark']:.1f}s"
    )


if __name__ == "__main__":
    main()
