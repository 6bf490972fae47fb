"""A cleaning pass in a child process (`log.cleaner.worker=process`, the default).

Why a process: the pass is Python work over every record (decode, filter, encode), and
in a worker thread it shares the GIL with the event loop, which then waits up to the
interpreter's switch interval at each hand-over: measured, the p99 of appends while a
pass runs grew 30-fold (bench/bench_compaction.py). In a child process the event loop
only shares the disk. The child gets the plan as JSON on stdin, writes the `.cleaned`
and `.swap` files (the same code and protocol as in a thread, broker/log/cleaner_pass.py)
and answers the outcome as JSON on stdout; it dies with the broker (PR_SET_PDEATHSIG).

Exit codes: 0 outcome, 3 corrupt segment (message on stdout), anything else a failure
(traceback on stderr).
"""

from __future__ import annotations

import ctypes
import json
import signal
import sys
import threading
from typing import Any

import attrs

from broker.log.cleaner_pass import (
    CleanedSegment,
    CorruptSegmentError,
    PassOutcome,
    PassPlan,
    SegmentSource,
    Throttler,
    run_pass,
)
from broker.log.transaction_index import AbortedTxn

EXIT_CORRUPT = 3
_PR_SET_PDEATHSIG = 1


def plan_to_json(plan: PassPlan, bytes_per_second: float) -> bytes:
    data = attrs.asdict(plan)
    data["last_batch_of_producer"] = list(plan.last_batch_of_producer.items())
    data["bytes_per_second"] = bytes_per_second if bytes_per_second < float("inf") else None
    return json.dumps(data).encode()


def plan_from_json(raw: bytes) -> tuple[PassPlan, float]:
    data: dict[str, Any] = json.loads(raw)
    rate = data.pop("bytes_per_second")
    data["segments"] = tuple(
        SegmentSource(**{**s, "aborted": tuple(AbortedTxn(**a) for a in s["aborted"])})
        for s in data["segments"]
    )
    data["aborted"] = tuple(AbortedTxn(**a) for a in data["aborted"])
    data["last_batch_of_producer"] = {int(p): int(o) for p, o in data["last_batch_of_producer"]}
    return PassPlan(**data), float("inf") if rate is None else float(rate)


def outcome_from_json(raw: bytes) -> PassOutcome:
    data: dict[str, Any] = json.loads(raw)
    data["cleaned"] = tuple(CleanedSegment(**c) for c in data["cleaned"])
    return PassOutcome(**data)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent still kills it on cancel
        pass


def main() -> int:
    _die_with_parent()
    plan, rate = plan_from_json(sys.stdin.buffer.read())
    try:
        outcome = run_pass(plan, Throttler(rate, threading.Event()))
    except CorruptSegmentError as exc:
        sys.stdout.write(str(exc))
        return EXIT_CORRUPT
    sys.stdout.write(json.dumps(attrs.asdict(outcome)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
