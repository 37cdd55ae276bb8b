"""The demo's chapters, in story order. Each returns facts for the JSON summary."""

from __future__ import annotations

from typing import Any

from strongroom.demo.data import customer_events
from strongroom.demo.story import EVENTS_TOPIC, Chapter, DemoContext
from strongroom.kafka.config import ClientConfig
from strongroom.kafka.transport import new_producer


def produce_customer_events(ctx: DemoContext, n_events: int = 300, n_customers: int = 25) -> dict[str, Any]:

    ctx.cluster.create_topic(EVENTS_TOPIC, partitions=3)
    producer = new_producer(ClientConfig(ctx.cluster.bootstrap_servers))
    delivered: list[int] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered.append(msg.offset())

    for key, value in customer_events(n_events, n_customers):
        producer.produce(EVENTS_TOPIC, value=value, key=key, headers=[("source", b"demo")], on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)
    sample = next(customer_events(1, n_customers))[1].decode()
    ctx.say(f"    produced {len(delivered)}/{n_events} customer events for {n_customers} customers to {EVENTS_TOPIC!r}")
    ctx.say(f"    a plaintext event today: {sample[:150]}...")
    return {"topic": EVENTS_TOPIC, "produced": len(delivered), "customers": n_customers}


def spark_streaming_summary(ctx: DemoContext) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

    schema = StructType([
        StructField("customer_id", StringType()),
        StructField("address", StructType([StructField("country", StringType())])),
        StructField("order", StructType([StructField("total", DoubleType()), StructField("items", IntegerType())])),
    ])  # fmt: skip
    stream = (
        ctx.spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", ctx.cluster.bootstrap_servers)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    events = stream.select(F.from_json(F.col("value").cast("string"), schema).alias("e"), "headers")
    per_country = events.groupBy(F.col("e.address.country").alias("country")).agg(
        F.count("*").alias("orders"),
        F.round(F.sum("e.order.total"), 2).alias("revenue"),
        F.approx_count_distinct("e.customer_id").alias("customers"),
    )
    query = (
        per_country.writeStream.outputMode("complete").format("memory").queryName("demo_orders_by_country")
        .option("checkpointLocation", str(ctx.workdir / "chk-summary"))
        .trigger(availableNow=True)
        .start()
    )  # fmt: skip
    query.awaitTermination()
    rows = ctx.spark.sql("SELECT * FROM demo_orders_by_country ORDER BY revenue DESC").collect()
    total = sum(r["orders"] for r in rows)
    ctx.say(f"    Spark Structured Streaming (spark-sql-kafka-0-10) read {total} events; orders by country:")
    ctx.say("      country  orders  revenue   customers")
    for r in rows:
        ctx.say(f"      {r['country']:7}  {r['orders']:6}  {r['revenue']:9.2f}  {r['customers']:9}")
    return {"events_read": total, "by_country": [r.asDict() for r in rows]}


def all_chapters() -> list[tuple[str, Chapter]]:
    """The whole story, in order (each area's chapters live in its own demo module)."""
    from strongroom.demo import audit, doctor, encryption, kek_per_topic, recovery, schema_aware

    return [
        ("Produce customer events (PII: name, email, address; non-PII: order totals)", produce_customer_events),
        ("Read them back with a Spark Structured Streaming query", spark_streaming_summary),
        *encryption.CHAPTERS,
        *recovery.CHAPTERS,
        *kek_per_topic.CHAPTERS,
        *schema_aware.CHAPTERS,
        *audit.CHAPTERS,
        *doctor.CHAPTERS,
    ]
