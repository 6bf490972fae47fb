"""The attacks of the hostile-load table (bench/bench_hostile.py) and the process that
runs one, in a module of their own: the attacker's process (spawned for every run)
imports this module and bench/hostile_clients.py, not the table's own imports.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from bench import hostile_clients as hc

MIB = 1 << 20
TOPIC = "hostile-bench"
READ_TIMEOUT_MS = 2000
"""The slow senders' broker closes them after `socket.request.read.timeout.ms`: this."""

Attack = Callable[[int, float], Awaitable[dict[str, Any]]]


def _attack_main(attack: Attack, port: int, duration_s: float, results: Any) -> None:
    # An attacker would be on another machine: here it only gets the CPU that the
    # broker and the bystander leave, so that what is measured is the broker's doing.
    # Nice 19 alone does not do that under Linux's EEVDF scheduler: a waking bystander
    # still waits its turn behind the attacker's slice; SCHED_IDLE yields at once.
    if attacker_priority() == "idle":
        os.nice(19)
        if sys.platform == "linux":
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    async def main() -> dict[str, Any]:
        results.put("started")
        return await attack(port, trio.current_time() + duration_s)

    results.put(trio.run(main))


def attacker_priority() -> str:
    """`idle` (the default) or `normal` (BENCH_ATTACKER=normal): on a machine busy with
    other work an idle attacker gets no CPU and its attack does not happen (see the
    attack units / s column); a normal one competes with the bystander for the CPU."""
    return "normal" if os.environ.get("BENCH_ATTACKER") == "normal" else "idle"


def attack_in_process(
    attack: Attack, port: int, duration_s: float, on_start: Callable[[], None]
) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_attack_main, args=(attack, port, duration_s, results))
    process.start()
    try:
        if results.get(timeout=60) == "started":
            on_start()
        row: dict[str, Any] = results.get(timeout=duration_s + 60)
    finally:
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
    return row


async def large_frames(
    connections: int, frame_bytes: int, port: int, deadline: float
) -> dict[str, Any]:
    sent = [0]
    frame = hc.large_produce_frame(TOPIC, frame_bytes)
    await hc.pipeline_without_reading(port, frame, connections, deadline, sent)
    return {"attack units": sent[0]}


async def large_fetches(
    connections: int, topic_bytes: int, port: int, deadline: float
) -> dict[str, Any]:
    await hc.fill_topic(port, TOPIC, topic_bytes)
    sent = [0]
    frame = hc.large_fetch_frame(TOPIC, 2 * topic_bytes)
    await hc.fetch_without_reading(port, frame, connections, deadline, sent)
    # Written into socket buffers, not answered: no CPU per frame for this one.
    return {"fetches sent": sent[0]}


async def slow(connections: int, port: int, deadline: float) -> dict[str, Any]:
    closed: list[float] = []
    end = deadline + 2 * READ_TIMEOUT_MS / 1000
    await hc.slow_senders(port, connections, MIB, 1.0, end, closed)
    return {
        "slow senders closed": f"{len(closed)}/{connections}",
        "close after s (median / max)": (
            f"{hc.percentile(closed, 0.5):.2f} / {max(closed):.2f}" if closed else "-"
        ),
    }


async def hostile(
    count: int, tasks: int, rate: float | None, port: int, deadline: float
) -> dict[str, Any]:
    sent = [0]
    frames = hc.hostile_frames(TOPIC, seed=14, max_request_bytes=100 * MIB)
    await hc.send_hostile_frames(port, frames, count, deadline, tasks, sent, rate)
    return {"attack units": sent[0]}
