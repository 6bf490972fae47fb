"""`make bench`: run every benchmark, side by side with its reference, and write
docs/benchmarks.md with the tables, the machine and the date.

Each benchmark module exposes `run(duration_s) -> list[dict]`; one dict is one
row. Modules whose optional reference (kio, tansu) is missing still report
our own figures. Usage: python -m bench [--only NAME ...] [--duration SECONDS]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# (module, title, default duration in seconds per measurement)
BENCHMARKS: list[tuple[str, str, float]] = [
    ("bench.bench_codec", "Codec: µs per decode/encode, ours and kio", 1.0),
    ("bench.bench_records", "Record batches", 1.0),
    ("bench.bench_network", "Small requests: broker and a minimal Trio server", 3.0),
    (
        "bench.bench_authorizer",
        "ACL authorizer: authorize() over 10k ACLs; broker with it off and on",
        2.0,
    ),
    (
        "bench.bench_quotas",
        "Client quotas: accounting cost on the produce path, quotas off and on",
        2.0,
    ),
    ("bench.bench_produce_consume", "Produce and consume (confluent-kafka), ours and tansu", 5.0),
    ("bench.bench_groups", "Consumer groups, ours and tansu", 5.0),
    ("bench.bench_security", "TLS beside PLAINTEXT, and SCRAM logins", 5.0),
    (
        "bench.bench_transactions",
        "Transactions: transactional vs idempotent produce, commit latency",
        3.0,
    ),
    ("bench.bench_client_security", "Pipeline client: PLAINTEXT, SSL, SASL_SSL", 4.0),
    (
        "bench.bench_scaling",
        "Scaling: 1 and process.count broker processes, 1-8 client processes",
        2.0,
    ),
    ("bench.bench_pipeline", "Spark pipeline", 10.0),
    ("bench.bench_sink_commit", "Spark sink: commit-log bytes read back per micro-batch", 2.0),
    (
        "bench.bench_hostile",
        "Hostile load: memory, bystander latency, new clients, sockets left, failed logins",
        2.0,
    ),
    (
        "bench.bench_replication",
        "Replication on three hosts (issue 20): RF 3 vs RF 1, rolling restart, kill -9",
        3.0,
    ),
    ("bench.bench_console", "Produce with a web console page refreshing and without", 4.0),
    (
        "bench.bench_compaction",
        "Log compaction: cleaner MB/s, append p99 while a pass runs, 1M updates to 10k keys",
        3.0,
    ),
]

REPO = Path(__file__).resolve().parents[1]


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}){memory}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def _cell(value: Any) -> str:
    """Floats to a readable precision: whole numbers above 1000, else 3 significant digits."""
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_no rows_\n"
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", action="append", default=[], help="module suffix, e.g. network")
    parser.add_argument("--duration", type=float, help="seconds per measurement (overrides)")
    parser.add_argument("--output", default=str(REPO / "docs" / "benchmarks.md"))
    args = parser.parse_args(argv)
    sections: list[str] = []
    failures = 0
    for module_name, title, duration in BENCHMARKS:
        if args.only and not any(module_name.endswith(o) for o in args.only):
            continue
        print(f"== {title} ({module_name})", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(module_name)
            rows = module.run(args.duration or duration)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            print(f"   not present: {module_name}", flush=True)
            continue
        except Exception:
            failures += 1
            traceback.print_exc()
            sections.append(f"## {title}\n\nFailed: see the `make bench` output.\n")
            continue
        elapsed = time.monotonic() - started
        table = markdown_table(rows)
        print(table, flush=True)
        print(f"   ({elapsed:.0f} s)", flush=True)
        sections.append(f"## {title}\n\n{table}")
    today = datetime.date.today().isoformat()
    document = (
        "# Benchmarks\n\n"
        f"Measured by `make bench` on {today}, on {machine_description()}. "
        "The machine is shared and noisy: compare the side-by-side ratios measured in "
        "the same run rather than absolute figures across runs.\n\n" + "\n".join(sections)
    )
    Path(args.output).write_text(document, encoding="utf-8")
    print(f"wrote {args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
