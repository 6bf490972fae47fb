"""Issue 19's redesign against the code before it: both brokers side by side, load alternated.

The old code is commit `OLD_COMMIT` (main before the redesign), extracted with `git archive`
into a temporary directory (or taken from `$BENCH_OLD_TREE`), its record walk compiled as
`make native` does, and run with this tree's interpreter and packages. Both brokers run at
once; the load goes to one then the other in short slices (old, new, new, old, ...) so a
change in what else the shared machine runs falls on both alike. The figure is broker process
CPU per request or record (from /proc), not wall time.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.bench_network import measured_load, request_bytes
from bench.bench_produce_consume import _create_topic, measure_consume, measure_produce
from bench.servers import (
    our_broker_process,
    process_cpu_seconds,
    tansu_binary,
    tansu_broker_process,
)
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest

OLD_COMMIT = "56ec732"
REPOSITORY = Path(__file__).resolve().parent.parent
CONNECTIONS = 64
DEPTH = 5


@contextlib.contextmanager
def old_tree() -> Iterator[Path]:
    """The old code's source tree, with its native record walk built when a compiler is here."""
    given = os.environ.get("BENCH_OLD_TREE")
    if given:
        yield Path(given)
        return
    with tempfile.TemporaryDirectory(prefix="bench-old-tree-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", OLD_COMMIT],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        subprocess.run(
            [sys.executable, "tools/build_native.py"],
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": tmp},
            check=False,
            capture_output=True,
        )
        yield Path(tmp)


@contextlib.contextmanager
def broker_from(source: Path, work: Path) -> Iterator[tuple[int, int]]:
    """A one-process broker run from `source`; yields its port and process id."""
    work.mkdir(parents=True, exist_ok=True)
    with our_broker_process(work, source=source) as (bootstrap, pid):
        yield int(bootstrap.rsplit(":", 1)[1]), pid


Slice = Callable[[int, int], tuple[float, float]]
"""One load slice against (port, pid): returns (units done, broker CPU seconds used)."""
Measured = tuple[float, float, float]
"""A slice's units done, broker CPU seconds and wall seconds."""


def small_requests(template: bytes, duration_s: float) -> Slice:
    def one(port: int, pid: int) -> tuple[float, float]:
        result = measured_load(pid, port, template, CONNECTIONS, DEPTH, duration_s)
        return result["requests"], result["cpu_us_per_request"] * result["requests"] / 1e6

    return one


def produce(value_size: int, duration_s: float, topics: dict[int, str]) -> Slice:
    def one(port: int, pid: int) -> tuple[float, float]:
        before = process_cpu_seconds(pid)
        result = measure_produce(f"127.0.0.1:{port}", topics[port], 1, value_size, "1", duration_s)
        return result["messages"], process_cpu_seconds(pid) - before

    return one


def fetch(value_size: int, duration_s: float, topics: dict[int, str], count: int) -> Slice:
    def one(port: int, pid: int) -> tuple[float, float]:
        before = process_cpu_seconds(pid)
        result = measure_consume(f"127.0.0.1:{port}", topics[port], 1, count, value_size, 5.0)
        return result["messages"], process_cpu_seconds(pid) - before

    return one


def alternate(
    brokers: dict[str, tuple[int, int]], work: Slice, rounds: int
) -> dict[str, list[Measured]]:
    """`rounds` slices per broker in ABBA order (old, new, new, old, ...)."""
    names = list(brokers)
    slices: dict[str, list[Measured]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            units, cpu = work(*brokers[name])
            slices[name].append((units, cpu, time.perf_counter() - started))
    return slices


def _per_unit_us(slices: list[Measured]) -> float:
    return sum(s[1] for s in slices) / max(sum(s[0] for s in slices), 1.0) * 1e6


def _mb_per_s(slices: list[Measured], value_size: int) -> float:
    return sum(s[0] for s in slices) * value_size / sum(s[2] for s in slices) / 1e6


def _slice_ratios(new: list[Measured], old: list[Measured]) -> tuple[float, float, float]:
    """new/old of each pair of slices run one after the other: min, median, max. The median
    is the figure that a burst of other work on the machine moves least."""
    ratios = sorted(
        (n[1] / max(n[0], 1.0)) / (o[1] / max(o[0], 1.0)) for n, o in zip(new, old, strict=True)
    )
    return ratios[0], ratios[len(ratios) // 2], ratios[-1]


def run(
    duration_s: float = 1.0, rounds: int = 6, records: bool = True, only: str = ""
) -> list[dict[str, Any]]:
    """`records=False`: the small requests only; `only`: the rows whose label holds it."""
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-old-new-") as tmp,
        old_tree() as old_source,
        broker_from(old_source, Path(tmp) / "old") as old,
        broker_from(REPOSITORY, Path(tmp) / "new") as new,
        contextlib.ExitStack() as stack,
    ):
        brokers = {"old": old, "new": new}
        binary = tansu_binary()
        if binary is not None:
            tansu_work = Path(tmp) / "tansu"
            tansu_work.mkdir()
            bootstrap, tansu_pid = stack.enter_context(tansu_broker_process(binary, tansu_work))
            brokers["tansu"] = (int(bootstrap.rsplit(":", 1)[1]), tansu_pid)
        load_before = os.getloadavg()[0]
        # (label, unit, value size, the slice, what fills its topics when the row that
        # would have filled them is not run: the fetch row reads what produce wrote)
        workloads: list[tuple[str, str, int, Slice, Slice | None]] = []
        for name, body, version in (
            ("ApiVersions v0", ApiVersionsRequest(), 0),
            ("Metadata v12", MetadataRequest(topics=None), 12),
        ):
            template = request_bytes(body, version)
            label = f"{name}, {CONNECTIONS} conns x {DEPTH} pipelined"
            workloads.append((label, "request", 0, small_requests(template, duration_s), None))
        for value_size in (1024, 100) if records else ():
            topics = {port: _create_topic(f"127.0.0.1:{port}", 1) for port, _ in brokers.values()}
            fill = produce(value_size, duration_s * 2, topics)
            produce_label = f"produce {value_size} B records, acks=1"
            workloads.append((produce_label, "record", value_size, fill, None))
            if value_size == 1024:
                fetch_slice = fetch(value_size, 0, topics, 50_000)
                filled = fill if only not in produce_label else None
                label = f"fetch {value_size} B records"
                workloads.append((label, "record", value_size, fetch_slice, filled))
        for label, unit, value_size, work, filled_by in workloads:
            if only not in label:
                continue
            if filled_by is not None:
                for port, pid in brokers.values():
                    filled_by(port, pid)
            for port, pid in brokers.values():  # warm-up slice, not counted
                work(port, pid)
            slices = alternate(brokers, work, rounds)
            old_us, new_us = _per_unit_us(slices["old"]), _per_unit_us(slices["new"])
            low, median, high = _slice_ratios(slices["new"], slices["old"])
            row: dict[str, Any] = {
                "benchmark": label,
                f"old CPU µs/{unit}": round(old_us, 2),
                f"new CPU µs/{unit}": round(new_us, 2),
                "new/old": round(new_us / old_us, 3),
                "slice pairs new/old (min / median / max)": f"{low:.2f} / {median:.2f} / {high:.2f}",
            }
            if "tansu" in slices:
                row[f"tansu CPU µs/{unit}"] = round(_per_unit_us(slices["tansu"]), 2)
            if value_size:
                for name, measured in slices.items():
                    row[f"{name} MB/s"] = round(_mb_per_s(measured, value_size), 1)
            rows.append(row)
        rows.append({"benchmark": f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"})
    return rows


if __name__ == "__main__":
    from bench.bench_produce_consume import print_table

    # python -m bench.bench_old_new [SLICE_SECONDS [ROUNDS [ROW_LABEL_PART]]]
    print_table(
        run(
            float(sys.argv[1]) if len(sys.argv) > 1 else 1.0,
            int(sys.argv[2]) if len(sys.argv) > 2 else 6,
            only=sys.argv[3] if len(sys.argv) > 3 else "",
        )
    )
