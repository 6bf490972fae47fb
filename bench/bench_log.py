"""Throughput of the log: appends (with and without fsync per batch) and reads.

Run: ``python -m bench.bench_log`` (one line per measurement). Data goes to a
temporary directory that is removed afterwards. Reads compare the event-loop path
(small reads) with the worker-thread path (reads above THREAD_READ_THRESHOLD).
"""

from __future__ import annotations

import shutil
import tempfile
import time

import trio

import broker.log.partition_log as partition_log_module
from broker.config import BrokerConfig
from broker.log.log_manager import LogManager
from broker.protocol.records import Record, encode_batch, read_batch_header

_BATCH_RECORDS = 100
_VALUE = b"v" * 100


def _batch() -> tuple[bytes, object]:
    data = encode_batch([Record(i, i, None, _VALUE) for i in range(_BATCH_RECORDS)])
    return data, read_batch_header(data)


async def _bench(duration_s: float, directory: str) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    manager = LogManager(BrokerConfig({"log.dirs": directory, "log.segment.bytes": "67108864"}))
    await manager.open()
    try:
        data, header = _batch()
        for name, configs in (
            ("append", {}),
            ("append[flush.messages=1]", {"flush.messages": "1"}),
        ):
            log = (
                await manager.create_topic(
                    name.replace("[", "_").replace("]", "").replace("=", "-"), 1, configs=configs
                )
            ).partitions[0]
            count = 0
            start = time.perf_counter()
            while time.perf_counter() - start < duration_s:
                await log.append(data, header)  # type: ignore[arg-type]
                count += 1
            elapsed = time.perf_counter() - start
            results.append(
                {
                    "name": name,
                    "batches_per_s": round(count / elapsed),
                    "mb_per_s": round(count * len(data) / elapsed / 1e6, 1),
                    "batch_bytes": len(data),
                }
            )
        log = manager.topics()["append"].partitions[0]
        for max_bytes, threshold in ((16 * 1024, None), (1 << 20, None), (1 << 20, 1 << 30)):
            if threshold is not None:
                partition_log_module.THREAD_READ_THRESHOLD = threshold
            offset = 0
            count = 0
            total = 0
            start = time.perf_counter()
            while time.perf_counter() - start < duration_s:
                result = await log.read(offset, max_bytes)
                total += len(result.records)
                count += 1
                offset = (offset + 10 * _BATCH_RECORDS) % max(log.log_end_offset - 2000, 1)
            elapsed = time.perf_counter() - start
            where = "loop" if max_bytes <= partition_log_module.THREAD_READ_THRESHOLD else "thread"
            results.append(
                {
                    "name": f"read[max_bytes={max_bytes},{where}]",
                    "reads_per_s": round(count / elapsed),
                    "mb_per_s": round(total / elapsed / 1e6, 1),
                }
            )
    finally:
        await manager.close()
    return results


def run(duration_s: float) -> list[dict[str, object]]:
    directory = tempfile.mkdtemp(prefix="bench-log-")
    saved = partition_log_module.THREAD_READ_THRESHOLD
    try:
        return trio.run(_bench, duration_s, directory)
    finally:
        partition_log_module.THREAD_READ_THRESHOLD = saved
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    for row in run(2.0):
        print(row)
