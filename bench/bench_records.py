"""Throughput of the record-batch layer: what the broker and the pipeline pay per batch.

Run: ``python -m bench.bench_records`` (prints one line per measurement).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.protocol.compression import CompressionType
from broker.protocol.records import (
    Record,
    decode_records,
    encode_batch,
    validate_record_set,
    validate_records,
)

_VALUE_SIZE = 100
_ROWS_PER_BATCH = 500
_HEADER_BATCH_BYTES = 16 * 1024


def _records(count: int) -> list[Record]:
    return [
        Record(i, i, b"key-%06d" % i, (b"%06d" % i) * (_VALUE_SIZE // 6) + b"x" * (_VALUE_SIZE % 6))
        for i in range(count)
    ]


def _timed(fn: Callable[[], object], duration_s: float) -> tuple[int, float]:
    """Call ``fn`` repeatedly for about ``duration_s``; return (calls, seconds)."""
    fn()  # warm-up
    calls = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < duration_s:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
    return calls, elapsed


def _bench_decode(kind: CompressionType, duration_s: float) -> dict[str, object]:
    batch = encode_batch(_records(_ROWS_PER_BATCH), compression=kind, base_timestamp=0)
    calls, elapsed = _timed(lambda: decode_records(batch), duration_s)
    return {
        "name": f"decode_records[{kind.name.lower()}]",
        "rows_per_s": round(calls * _ROWS_PER_BATCH / elapsed),
        "batch_bytes": len(batch),
        "rows_per_batch": _ROWS_PER_BATCH,
    }


def _bench_validate(duration_s: float) -> dict[str, object]:
    count = _HEADER_BATCH_BYTES // (_VALUE_SIZE + 20)
    batch = encode_batch(_records(count), base_timestamp=0)
    calls, elapsed = _timed(lambda: validate_record_set(batch), duration_s)
    return {
        "name": "validate_record_set[16KiB]",
        "us_per_batch": round(elapsed / calls * 1e6, 2),
        "batch_bytes": len(batch),
    }


def _bench_produce_check(value_size: int, duration_s: float) -> dict[str, object]:
    """What Produce pays per record to check a batch (validate_records, which builds
    nothing), beside decoding it (decode_records, the reference it agrees with)."""
    count = 1000
    records = [Record(i, i, None, b"v" * value_size) for i in range(count)]
    batch = encode_batch(records, base_timestamp=0)
    walk_calls, walk_s = _timed(lambda: validate_records(batch), duration_s / 2)
    decode_calls, decode_s = _timed(lambda: decode_records(batch), duration_s / 2)
    walk_us = walk_s / walk_calls / count * 1e6
    decode_us = decode_s / decode_calls / count * 1e6
    return {
        "name": f"produce record check [{value_size} B values, {count} records]",
        "validate_records us_per_record": round(walk_us, 3),
        "decode_records us_per_record": round(decode_us, 3),
        "ratio decode/validate": round(decode_us / walk_us, 2),
    }


def run(duration_s: float = 1.0) -> list[dict[str, object]]:
    """One dict per measurement; each takes about ``duration_s``."""
    results = [
        _bench_decode(kind, duration_s)
        for kind in (CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD)
    ]
    results.append(_bench_validate(duration_s))
    results += [_bench_produce_check(size, duration_s) for size in (100, 1024)]
    return results


if __name__ == "__main__":
    for row in run():
        print(row)
