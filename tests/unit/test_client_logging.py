"""librdkafka never writes raw ``%3|…`` lines on the operator's terminal (issue 15 item 4).

Every confluent-kafka client strongroom builds is made by :mod:`strongroom.kafka.transport`, which hands it
a Python ``logger``: its log lines go through Python logging (shown with ``--verbose``) instead of
librdkafka's default, raw lines on stderr. The static check below finds a client constructed anywhere
else; the process checks run real clients against a port nobody listens on (what every client sees after
a stack stopped, or while a broker restarts) and read the process's stderr.
"""

from __future__ import annotations

import ast
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "strongroom"
TRANSPORT = SRC / "kafka" / "transport.py"
CLIENT_CLASSES = {"Producer", "Consumer", "AdminClient"}
RAW_LIBRDKAFKA_LINE = re.compile(r"^%\d\|", re.MULTILINE)


def _constructed_names(func: ast.expr) -> set[str]:
    """Client class names a call's callee may be: ``Consumer(...)``, ``ck.Consumer(...)``,
    ``(factory or Consumer)(...)``."""
    if isinstance(func, ast.Name):
        return {func.id}
    if isinstance(func, ast.Attribute):
        return {func.attr}
    if isinstance(func, ast.BoolOp | ast.IfExp):
        parts = func.values if isinstance(func, ast.BoolOp) else [func.body, func.orelse]
        return set().union(*(_constructed_names(p) for p in parts))
    return set()


def client_constructions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {name}(...)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for name in sorted(_constructed_names(node.func) & CLIENT_CLASSES)
    ]


def test_only_the_transport_constructs_confluent_kafka_clients() -> None:
    """In the package, and in the tests and benchmarks too: a raw client a test leaves behind writes
    ``%3|…|FAIL|`` lines after pytest's summary once the session's cluster is gone."""
    files = [path for tree in (SRC, ROOT / "tests", ROOT / "bench") for path in sorted(tree.rglob("*.py"))]
    found = [hit for path in files if path != TRANSPORT for hit in client_constructions(path)]
    assert found == [], "clients built outside strongroom.kafka.transport log raw %N| lines on stderr"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: Programs that run one kind of client against a port nobody listens on until it gives up.
PROGRAMS = {
    "audit reader (audit scrub/ledger/watch)": """
        from strongroom.audit.kafka_reader import read_range
        from strongroom.errors import StrongroomError
        try:
            list(read_range({"bootstrap.servers": BOOTSTRAP}, "orders", 0, 0, 10, idle_timeout=2))
        except StrongroomError as exc:
            print("handled:", exc.problem)
        """,
    "transport consumer": """
        from strongroom.kafka.config import ClientConfig
        from strongroom.kafka.transport import new_consumer
        consumer = new_consumer(ClientConfig(BOOTSTRAP), "g")
        consumer.subscribe(["orders"])
        for _ in range(10):
            consumer.poll(0.2)
        consumer.close()
        print("handled: closed")
        """,
    "transport producer": """
        from strongroom.kafka.config import ClientConfig
        from strongroom.kafka.transport import new_producer
        producer = new_producer(ClientConfig(BOOTSTRAP), {"message.timeout.ms": 1500})
        producer.produce("orders", b"v")
        print("handled: unflushed", producer.flush(2))
        """,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_clients_against_a_dead_broker_print_no_raw_librdkafka_lines(name: str) -> None:
    program = f"BOOTSTRAP = '127.0.0.1:{_closed_port()}'\n" + textwrap.dedent(PROGRAMS[name])
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )  # fmt: skip
    assert "handled:" in done.stdout, done.stderr[-2000:]
    raw = RAW_LIBRDKAFKA_LINE.findall(done.stderr)
    assert not raw, f"{len(raw)} raw librdkafka line(s) on stderr, e.g.:\n" + done.stderr.splitlines()[0]
