"""A cleaning pass in a child process (`log.cleaner.worker=process`, the default).

Why a process: the pass is Python work over every record (decode, filter, encode), and
in a worker thread it shares the GIL with the event loop, which then waits up to the
interpreter's switch interval at each hand-over: measured, the p99 of appends while a
pass runs grew 30-fold (bench/bench_compaction.py). In a child process the event loop
only shares the disk. The child gets the plan as JSON on stdin, writes the `.cleaned`
and `.swap` files (the same code and protocol as in a thread, broker/log/cleaner_pass.py)
and answers the outcome as JSON on stdout; orphaned (the broker killed), it stops at
its next batch.

Exit codes: 0 outcome, 3 corrupt segment (message on stdout), 4 stopped, anything else
a failure (traceback on stderr).
"""

from __future__ import annotations

import os
import sys
import threading

from broker.log.cleaner_messages import EXIT_CORRUPT, outcome_to_json, plan_from_json
from broker.log.cleaner_pass import CorruptSegmentError, PassAborted, Throttler, run_pass

EXIT_ABORTED = 4
_ORPHAN_CHECK_S = 1.0


def _stop_when_orphaned(stop: threading.Event, parent: int) -> None:
    """The broker died (kill -9): end the pass at its next batch. (PR_SET_PDEATHSIG
    would fire when the *thread* that started the child ends, and Trio starts
    processes from worker threads that come and go.)"""
    while not stop.wait(_ORPHAN_CHECK_S):
        if os.getppid() != parent:
            stop.set()


def main() -> int:
    stop = threading.Event()
    threading.Thread(target=_stop_when_orphaned, args=(stop, os.getppid()), daemon=True).start()
    plan, rate = plan_from_json(sys.stdin.buffer.read())
    try:
        outcome = run_pass(plan, Throttler(rate, stop))
    except CorruptSegmentError as exc:
        sys.stdout.write(str(exc))
        return EXIT_CORRUPT
    except PassAborted:
        return EXIT_ABORTED
    sys.stdout.write(outcome_to_json(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
