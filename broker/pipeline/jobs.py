"""The pipeline's two jobs: archive topics to Parquet, aggregate them back to a topic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.pipeline.options import FORMAT_NAME, security_options

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SPARK_DEFAULT_SHUFFLE_PARTITIONS = "200"


def shuffle_partitions(configured: str, default_parallelism: int) -> str:
    """The aggregate's shuffle width: the cores Spark has, unless the session set its own.

    Spark's default of 200 made every micro-batch of a few hundred rows run 200 tasks, each
    with its own sink connection. A stateful query keeps the width its checkpoint began with.
    """
    if configured != SPARK_DEFAULT_SHUFFLE_PARTITIONS:
        return configured
    return str(max(1, default_parallelism))


def kafka_stream(
    spark: Any, bootstrap: str, subscribe: str, options: Mapping[str, str] | None = None
) -> Any:
    reader = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", subscribe)
        .option("startingOffsets", "earliest")
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load()


def start_archive(
    spark: Any,
    *,
    bootstrap: str,
    subscribe: str,
    output: str,
    checkpoint: str,
    available_now: bool = False,
    trigger_interval: str | None = None,
    options: Mapping[str, str] | None = None,
) -> Any:
    """Kafka-source columns to Parquet under ``topic=.../date=...``; exactly once via the
    checkpoint (offsets and the file sink's log advance together)."""
    from pyspark.sql import functions as F

    frame = kafka_stream(spark, bootstrap, subscribe, options).withColumn(
        "date", F.to_date(F.col("timestamp"))
    )
    writer = (
        frame.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .partitionBy("topic", "date")
        .queryName("archive")
    )
    writer = _trigger(writer, available_now, trigger_interval)
    return writer.start()


def start_aggregate(
    spark: Any,
    *,
    bootstrap: str,
    subscribe: str,
    output_topic: str,
    checkpoint: str,
    window: str = "1 minute",
    watermark: str = "1 minute",
    output_mode: str = "update",
    available_now: bool = False,
    trigger_interval: str | None = None,
    options: Mapping[str, str] | None = None,
) -> Any:
    """Count and bytes per key per event-time window, as JSON records on ``output_topic``.

    In update mode every micro-batch writes the windows it changed (the newest record
    per key and window is the current total); in append mode a window is written once,
    after the watermark passes its end.
    """
    from pyspark.sql import functions as F

    current = spark.conf.get(SHUFFLE_PARTITIONS)
    partitions = shuffle_partitions(current, spark.sparkContext.defaultParallelism)
    if partitions != current:
        spark.conf.set(SHUFFLE_PARTITIONS, partitions)
    events = kafka_stream(spark, bootstrap, subscribe, options)
    # The sink talks to the same broker: the source's TLS and SASL options apply to it too.
    security = security_options(options or {})
    counts = (
        events.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window).alias("window"), F.col("key"))
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.coalesce(F.length("value"), F.lit(0))).alias("bytes"),
        )
    )
    out = counts.select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.date_format(F.col("window.start"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias(
                    "window_start"
                ),
                F.date_format(F.col("window.end"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                F.col("key").cast("string").alias("key"),
                F.col("count"),
                F.col("bytes"),
            )
        ).alias("value"),
    )
    if output_mode == "append":
        writer = (
            out.writeStream.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output_topic)
            .option("checkpointLocation", checkpoint)
            .options(**security)
            .outputMode("append")
        )
    else:
        # Python sinks take append mode only; update mode goes through foreachBatch, which
        # hands the batch id to the batch writer for the same replay protection.
        writer = (
            out.writeStream.foreachBatch(
                _write_to_topic(bootstrap, output_topic, query_id=checkpoint, security=security)
            )
            .option("checkpointLocation", checkpoint)
            .outputMode(output_mode)
        )
    writer = _trigger(writer.queryName("aggregate"), available_now, trigger_interval)
    return writer.start()


def _write_to_topic(
    bootstrap: str, topic: str, *, query_id: str, security: Mapping[str, str]
) -> Any:
    def write(frame: Any, batch_id: int) -> None:
        (
            frame.write.format(FORMAT_NAME)
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("sink.queryId", query_id)
            .option("sink.batchId", str(batch_id))
            .options(**security)
            .save()
        )

    return write


def _trigger(writer: Any, available_now: bool, interval: str | None) -> Any:
    if available_now:
        return writer.trigger(availableNow=True)
    if interval:
        return writer.trigger(processingTime=interval)
    return writer
