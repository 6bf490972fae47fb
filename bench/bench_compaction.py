"""Log compaction: the cleaner's throughput, its effect on appends while it runs, and
what is left on disk of a topic with 1M updates to 10k keys.

Run: ``python -m bench.bench_compaction [UPDATES]`` (default 1,000,000 updates to 10,000
keys). In one process, on one LogManager as the broker runs it:

1. a compacted topic receives the updates (batches of 1000 records, 256 KiB segments);
2. appends of small batches to another topic are timed on the event loop with no
   cleaner running, then again while a cleaning pass of the compacted topic runs: in a
   worker thread, in a worker process (log.cleaner.worker, the default), and in a process
   throttled by log.cleaner.io.max.bytes.per.second. The ratio of the p99s is the cost of
   the cleaner to the request path (in a thread, the GIL it shares with the event loop);
3. after cleaning, the topic's bytes on disk are compared with its live data (the
   latest record of each key, key and value bytes), and reading it from the start must
   return exactly the latest value of every key.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time

import trio

from broker.config import BrokerConfig
from broker.log.log_cleaner import LogCleaner
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.protocol.records import (
    Record,
    encode_batch,
    iter_batches,
    iter_records,
    read_batch_header,
)

_KEYS = 10_000
_BATCH = 1000
_VALUE_BYTES = 100
_PROBE_VALUE = b"p" * 100


def _key(i: int) -> bytes:
    return b"key-%05d" % i


async def _fill(log: PartitionLog, updates: int, latest: dict[bytes, bytes]) -> None:
    rng = random.Random(7)
    for start in range(0, updates, _BATCH):
        records = []
        for i in range(min(_BATCH, updates - start)):
            key = _key(rng.randrange(_KEYS))
            value = b"%09d" % (start + i) + b"v" * (_VALUE_BYTES - 9)
            latest[key] = value
            records.append(Record(i, 0, key, value))
        data = encode_batch(records)
        await log.append(data, read_batch_header(data))


async def _probe_appends(log: PartitionLog, until: trio.Event, max_s: float) -> list[float]:
    """Append latencies (ms) of 10-record batches, one every ~1 ms, until ``until`` or
    ``max_s``; each includes a checkpoint, as a request handler yields after its append."""
    data = encode_batch([Record(i, 0, b"k", _PROBE_VALUE) for i in range(10)])
    header = read_batch_header(data)
    latencies: list[float] = []
    deadline = time.perf_counter() + max_s
    while not until.is_set() and time.perf_counter() < deadline and len(latencies) < 200_000:
        start = time.perf_counter()
        await log.append(data, header)
        await trio.lowlevel.checkpoint()
        latencies.append((time.perf_counter() - start) * 1000)
        await trio.sleep(0.001)
    return latencies


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * 0.99), len(ordered) - 1)] if ordered else 0.0


async def _read_latest(log: PartitionLog) -> dict[bytes, bytes | None]:
    seen: dict[bytes, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = await log.read(offset, 1 << 20)
        for header, view in iter_batches(result.records):
            for record in iter_records(view, header):
                assert record.key is not None
                seen[record.key] = record.value
            offset = header.last_offset + 1
    return seen


async def _clean_with_probe(
    cleaner: LogCleaner, table: PartitionLog, probe: PartitionLog, max_s: float
) -> tuple[list[float], float, int]:
    done = trio.Event()
    outcome_bytes = 0
    elapsed = 0.0
    latencies: list[float] = []

    async def clean() -> None:
        nonlocal outcome_bytes, elapsed
        start = time.perf_counter()
        outcome = await cleaner.clean(table, cleaner.describe(table))
        elapsed = time.perf_counter() - start
        outcome_bytes = outcome.bytes_read if outcome is not None else 0
        done.set()

    async def measure() -> None:
        latencies.extend(await _probe_appends(probe, done, max_s))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(clean)
        nursery.start_soon(measure)
    return latencies, elapsed, outcome_bytes


async def _bench(duration_s: float, directory: str, updates: int) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    for worker, throttle in (("thread", None), ("process", None), ("process", 20e6)):
        raw = {"log.dirs": f"{directory}/{worker}-{throttle}", "log.cleaner.worker": worker}
        if throttle is not None:
            raw["log.cleaner.io.max.bytes.per.second"] = str(throttle)
        manager = LogManager(BrokerConfig(raw))
        await manager.open()
        try:
            table_configs = {
                "cleanup.policy": "compact",
                "segment.bytes": str(256 * 1024),
                "min.cleanable.dirty.ratio": "0.01",
            }
            latest: dict[bytes, bytes] = {}
            table = (await manager.create_topic("table", 1, configs=table_configs)).partitions[0]
            await _fill(table, updates, latest)
            probe = (await manager.create_topic("probe", 1)).partitions[0]
            # The reference: appends with no pass running, just before this one's pass
            # (on a shared machine the load drifts between configurations).
            baseline = await _probe_appends(probe, trio.Event(), duration_s)
            before = table.size_bytes
            assert manager.cleaner is not None
            with_cleaner, clean_s, cleaned_bytes = await _clean_with_probe(
                manager.cleaner, table, probe, max_s=600
            )
            after = table.size_bytes
            live = sum(len(k) + len(v) for k, v in latest.items())
            exact = await _read_latest(table) == latest
        finally:
            await manager.close()
        base_p99, p99 = _p99(baseline), _p99(with_cleaner)
        label = worker if throttle is None else f"{worker}, {throttle / 1e6:.0f} MB/s throttle"
        results.append(
            {
                "name": f"cleaner in a {label}: {updates} updates to {len(latest)} keys",
                "log_mb_before": round(before / 1e6, 1),
                "clean_s": round(clean_s, 2),
                "cleaner_mb_per_s": round(cleaned_bytes / 1e6 / clean_s, 1) if clean_s else 0,
                "disk_mb_after": round(after / 1e6, 2),
                "disk_over_live": round(after / live, 2),
                "latest_value_of_every_key": exact,
                "append_p99_ms_without": round(base_p99, 3),
                "append_p99_ms_with": round(p99, 3),
                "p99_ratio": round(p99 / base_p99, 2) if base_p99 else 0,
                "samples": f"{len(baseline)} / {len(with_cleaner)}",
            }
        )
    return results


def run(duration_s: float, updates: int = 1_000_000) -> list[dict[str, object]]:
    directory = tempfile.mkdtemp(prefix="bench-compaction-")
    try:
        return trio.run(_bench, duration_s, directory, updates)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    for row in run(3.0, int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000):
        print(row)
