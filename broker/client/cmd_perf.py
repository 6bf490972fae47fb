"""`perf produce` / `perf consume`, like kafka-producer-perf-test / kafka-consumer-perf-test.

Both are bounded by a record count and a time limit and print a progress line every
`--reporting-interval` seconds (on stderr with `--json`, so stdout is one JSON object).
`produce` sends one batch per request, round-robin over the partitions, with one
request in flight; a record's latency is its batch's time from send to acknowledgement
(acks=0: to the write), so the percentiles are weighted by records, as Kafka's are.
`--throughput` caps records per second (batches then hold at most a tenth of a
second's records). `consume` reads every partition from the start.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import string
import sys
from typing import Any

import attrs
import trio

from broker.client.fetcher import EARLIEST, Cursor, Fetcher, list_offsets
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.subcommands import Parsers, add_command
from broker.client.topics import describe_topic
from broker.protocol.api import ApiKey
from broker.protocol.messages import ProduceRequest
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.records import Record, encode_batch

MB = 1024 * 1024
_FETCH_WAIT_MS = 200

PRODUCE_EXAMPLES = """examples:
  broker client perf produce bench --num-records 100000 --record-size 100
  broker client perf produce bench --num-records 5000 --record-size 1024 --throughput 1000 --json
"""
CONSUME_EXAMPLES = """examples:
  broker client perf consume bench --num-records 100000
  broker client perf consume bench --num-records 5000 --timeout 5 --json
"""


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    perf = commands.add_parser(
        "perf", help="produce or consume load and measure it (kafka-*-perf-test)"
    ).add_subparsers(dest="action", required=True)
    p = add_command(perf, common, "produce", perf_produce, "produce load", PRODUCE_EXAMPLES)
    _add_bounds(p)
    p.add_argument("--record-size", type=int, required=True, metavar="BYTES")
    p.add_argument("--throughput", type=float, default=-1, help="records/s cap (default -1: none)")
    p.add_argument("--acks", type=int, choices=(-1, 0, 1), default=-1)
    p.add_argument("--batch-size", type=int, default=500, help="records per request (default 500)")
    p = add_command(perf, common, "consume", perf_consume, "consume load", CONSUME_EXAMPLES)
    _add_bounds(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="stop after S seconds without a record (default 10)",
    )


def _add_bounds(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--num-records", "--messages", type=int, required=True, metavar="N")
    p.add_argument(
        "--max-seconds", type=float, default=300.0, help="stop after this long (default 300)"
    )
    p.add_argument(
        "--reporting-interval",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between progress lines (default 5)",
    )


@attrs.define
class LatencyStats:
    """Records and bytes sent, and latencies weighted by the records they cover."""

    records: int = 0
    bytes: int = 0
    samples: list[tuple[float, int]] = attrs.Factory(list)  # (latency ms, records)

    def add(self, latency_ms: float, records: int, size: int) -> None:
        self.records += records
        self.bytes += size
        self.samples.append((latency_ms, records))

    def percentile(self, fraction: float) -> float:
        """The latency that `fraction` of the records did not exceed."""
        if not self.samples:
            return 0.0
        rank = max(1, math.ceil(fraction * self.records))
        seen = 0
        for latency, count in sorted(self.samples):
            seen += count
            if seen >= rank:
                return latency
        return max(latency for latency, _ in self.samples)

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        elapsed_s = max(elapsed_s, 1e-9)
        total = sum(latency * count for latency, count in self.samples)
        return {
            "records": self.records,
            "records_per_sec": round(self.records / elapsed_s, 1),
            "mb_per_sec": round(self.bytes / MB / elapsed_s, 3),
            "avg_latency_ms": round(total / self.records, 2) if self.records else 0.0,
            "max_latency_ms": round(self.percentile(1.0), 2),
            "p50_ms": round(self.percentile(0.50), 2),
            "p95_ms": round(self.percentile(0.95), 2),
            "p99_ms": round(self.percentile(0.99), 2),
            "p999_ms": round(self.percentile(0.999), 2),
            "elapsed_s": round(elapsed_s, 3),
        }


def produce_line(s: dict[str, Any], verb: str = "sent") -> str:
    return (
        f"{s['records']} records {verb}, {s['records_per_sec']} records/sec "
        f"({s['mb_per_sec']:.2f} MB/sec), {s['avg_latency_ms']:.2f} ms avg latency, "
        f"{s['max_latency_ms']:.2f} ms max latency"
    )


def _progress_stream(args: argparse.Namespace) -> Any:
    return sys.stderr if args.json else sys.stdout


async def perf_produce(session: ClientSession, args: argparse.Namespace) -> int:
    if args.num_records < 1 or args.record_size < 0 or args.batch_size < 1:
        raise ClientError("--num-records and --batch-size must be positive, --record-size >= 0")
    info = await describe_topic(session, args.topic, auto_create=True)
    version = session.version_for(ApiKey.PRODUCE, minimum=3)
    batch_size = args.batch_size
    if args.throughput > 0:
        batch_size = max(1, min(batch_size, int(args.throughput / 10)))
    payload = "".join(random.choices(string.ascii_uppercase, k=args.record_size)).encode()
    total, window = LatencyStats(), LatencyStats()
    start = window_start = trio.current_time()
    deadline = start + args.max_seconds
    sent = 0
    while sent < args.num_records and trio.current_time() < deadline:
        if args.throughput > 0:
            await trio.sleep_until(min(deadline, start + sent / args.throughput))
        count = min(batch_size, args.num_records - sent)
        partition = info.partitions[(sent // batch_size) % len(info.partitions)]
        records = [Record(i, 0, None, payload) for i in range(count)]
        body = ProduceRequest(
            transactional_id=None,
            acks=args.acks,
            timeout_ms=30_000,
            topic_data=(
                TopicProduceData(
                    name=args.topic,
                    partition_data=(
                        PartitionProduceData(index=partition, records=encode_batch(records)),
                    ),
                ),
            ),
        )
        sent_at = trio.current_time()
        if args.acks == 0:
            await session.send_without_response(body, version)
        else:
            response = await session.request(body, version)
            for topic in response.responses:
                for p in topic.partition_responses:
                    check_error(p.error_code, f"produce to {topic.name}-{p.index}")
        latency_ms = (trio.current_time() - sent_at) * 1000
        sent += count
        for stats in (total, window):
            stats.add(latency_ms, count, count * args.record_size)
        now = trio.current_time()
        if now - window_start >= args.reporting_interval:
            print(produce_line(window.summary(now - window_start)), file=_progress_stream(args))
            window, window_start = LatencyStats(), now
    summary = total.summary(trio.current_time() - start)
    summary["completed"] = sent >= args.num_records
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{produce_line(summary)}, {summary['p50_ms']:.0f} ms 50th, "
            f"{summary['p95_ms']:.0f} ms 95th, {summary['p99_ms']:.0f} ms 99th, "
            f"{summary['p999_ms']:.0f} ms 99.9th."
        )
    if not summary["completed"]:
        print(f"stopped after --max-seconds {args.max_seconds}", file=sys.stderr)
    return 0


def consume_summary(records: int, size: int, fetches: int, elapsed_s: float) -> dict[str, Any]:
    elapsed_s = max(elapsed_s, 1e-9)
    return {
        "records": records,
        "mb": round(size / MB, 4),
        "records_per_sec": round(records / elapsed_s, 1),
        "mb_per_sec": round(size / MB / elapsed_s, 3),
        "fetches": fetches,
        "elapsed_s": round(elapsed_s, 3),
    }


def consume_line(s: dict[str, Any]) -> str:
    return (
        f"{s['records']} records consumed ({s['mb']:.2f} MB) in {s['elapsed_s']:.2f} s, "
        f"{s['records_per_sec']} records/sec ({s['mb_per_sec']:.2f} MB/sec), {s['fetches']} fetches"
    )


async def perf_consume(session: ClientSession, args: argparse.Namespace) -> int:
    info = await describe_topic(session, args.topic)
    starts = await list_offsets(session, info.name, list(info.partitions), EARLIEST)
    cursors = [Cursor(p, starts[p]) for p in info.partitions]
    fetcher = Fetcher(session, info)
    records = size = fetches = 0
    window = (0, 0, 0)
    start = window_start = last_record_at = trio.current_time()
    deadline = start + args.max_seconds
    while records < args.num_records:
        now = trio.current_time()
        if now >= deadline or now - last_record_at >= args.timeout:
            break
        fetched = await fetcher.fetch(cursors, _FETCH_WAIT_MS)
        fetches += 1
        for _, record in fetched[: args.num_records - records]:
            records += 1
            size += len(record.key or b"") + len(record.value or b"")
        if fetched:
            last_record_at = trio.current_time()
        now = trio.current_time()
        if now - window_start >= args.reporting_interval:
            delta = (records - window[0], size - window[1], fetches - window[2])
            print(
                consume_line(consume_summary(*delta, now - window_start)),
                file=_progress_stream(args),
            )
            window, window_start = (records, size, fetches), now
    summary = consume_summary(records, size, fetches, trio.current_time() - start)
    summary["completed"] = records >= args.num_records
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(consume_line(summary))
    if not summary["completed"]:
        print(
            f"stopped at {records} of {args.num_records} records (--timeout or --max-seconds)",
            file=sys.stderr,
        )
    return 0
