"""Issue 20's measured rows: three hosts coordinated through ZooKeeper, each beside its
baseline in the same run.

Three `broker serve` processes, one per host on 127.0.0.2-4 (each its own port, log dir
and rack), and a ZooKeeper this benchmark starts itself (Debian's jars, as the tests'
fixture: `tests/zookeeper_fixture.py`; the hosts as `tests/hosts/host_processes.py`
runs them). Two topics of 3 partitions, one led by each host: replication factor 3 with
`min.insync.replicas=2`, and replication factor 1. Producers are confluent-kafka with
`acks=all` and idempotence, librdkafka's defaults otherwise (bench/replicated_load.py).

- **Throughput**: 2 producers of 1 KiB values as fast as they are acknowledged, in
  alternating slices (RF 1, RF 3, RF 3, RF 1, ...) on the same hosts; the ratio of
  RF 3 to RF 1 (goal: at least 0.5) and each pair's ratio.
- **Brokers first**: the same slices with the producers' threads at nice 19, so that
  the brokers get the two cores first, as hosts of their own would (the producers'
  CPU per record grows as acks=all answers slow, and takes the brokers' share).
- **Rolling restart**: under a paced load (2 producers, 100 records/s each), each host in
  turn stopped with SIGTERM (its controlled shutdown moves its leaderships away first),
  started again on its log dir, and waited for until every ISR is full; the longest time
  any one partition went without an acknowledgement from the SIGTERM to the full ISR
  (goal: under 1 s per host), beside the longest such gap of the same load without a
  restart over a quiet window.
- **Failover**: under the same paced load, `kill -9` of the host leading one partition
  (partition 0, 1, 2, 0, ... in turn), timed until a record of a partition it led, sent
  after the kill, is acknowledged; the host then started again and every ISR waited for.
  p50 and p99 (the worst, over 10) beside the ZooKeeper session timeout they wait for
  (goal: at most the timeout + 2 s).

`run(duration_s, quick=True)` is the smoke test's: one slice each, one host restarted,
one kill with a 3 s session. `python -m bench.bench_replication 3 throughput` runs one
row (any of ROWS) on its own.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
from confluent_kafka.admin import AdminClient, NewTopic

from bench.replicated_load import VALUE, Burst, PacedLoad, first_ack_after, longest_gap
from bench.servers import process_cpu_seconds
from tests.hosts.host_processes import (
    WAIT_S,
    Hosts,
    host_metadata,
    hosts_cluster,
    partitions,
    wait_for_full_isr,
    wait_until,
)
from tests.zookeeper_fixture import start_zookeeper, stop_zookeeper

PARTITIONS = 3
STALL_GOAL_S = 1.0
RATIO_GOAL = 0.5
WARM_S = 1.0


@attrs.frozen
class Plan:
    rounds: int
    """Throughput slices per replication factor (in pairs, alternated)."""
    slice_s: float
    kills: int
    restarts: int
    """Hosts restarted in the rolling restart."""
    session_timeout_ms: int
    quiet_s: float
    """The rolling restart's baseline window."""


def full_plan(duration_s: float) -> Plan:
    return Plan(
        rounds=6, slice_s=duration_s, kills=10, restarts=3, session_timeout_ms=6000, quiet_s=8.0
    )


QUICK = Plan(rounds=1, slice_s=0.5, kills=1, restarts=1, session_timeout_ms=3000, quiet_s=1.0)


ROWS = ("throughput", "brokers-first", "rolling", "failover")


def run(
    duration_s: float, quick: bool = False, only: frozenset[str] = frozenset(), repeat: int = 1
) -> list[dict[str, Any]]:
    """Every row, or those named in `only` (of ROWS); the rolling restart `repeat` times
    on the same hosts."""
    plan = QUICK if quick else full_plan(duration_s)
    if unknown := only - set(ROWS):
        raise ValueError(f"no such rows: {sorted(unknown)} (rows: {', '.join(ROWS)})")
    wanted = only or frozenset(ROWS)
    with (
        tempfile.TemporaryDirectory(prefix="bench-replication-") as work,
        three_hosts(Path(work), plan) as hosts,
    ):
        rf1 = create_topic(hosts, "rf1", 1, {})
        rf3 = create_topic(hosts, "rf3", 3, {"min.insync.replicas": "2"})
        rows = []
        if "throughput" in wanted:
            rows.append(throughput(hosts, plan, rf1, rf3))
        if "brokers-first" in wanted:
            rows.append(throughput_brokers_first(hosts, plan, rf1, rf3))
        if "rolling" in wanted:
            rows += [rolling_restart(hosts, plan, rf3) for _ in range(repeat)]
        if "failover" in wanted:
            rows += failover(hosts, plan, rf3)
    return rows


@contextlib.contextmanager
def three_hosts(work: Path, plan: Plan) -> Iterator[Hosts]:
    zookeeper_dir = work / "zookeeper"
    zookeeper_dir.mkdir()
    zookeeper = start_zookeeper(zookeeper_dir)
    try:
        settings = {"zookeeper.session.timeout.ms": str(plan.session_timeout_ms)}
        cluster = contextlib.contextmanager(hosts_cluster)
        with cluster(work, f"{zookeeper.hosts}/bench", settings) as hosts:
            try:
                yield hosts
            finally:
                # Nothing to keep: a controlled shutdown with a host down would wait out
                # its retries (controlled.shutdown.retry.backoff.ms) for nothing.
                for host in hosts.hosts.values():
                    if host.process is not None:
                        host.kill()
    finally:
        stop_zookeeper(zookeeper)


def create_topic(hosts: Hosts, name: str, factor: int, config: Mapping[str, str]) -> str:
    admin = AdminClient({"bootstrap.servers": hosts.bootstrap})
    new = NewTopic(name, num_partitions=PARTITIONS, replication_factor=factor, config=dict(config))
    admin.create_topics([new])[name].result(timeout=WAIT_S)

    def led() -> bool:
        views = partitions(hosts.bootstrap, name)
        return len(views) == PARTITIONS and all(len(v.isr) == factor for v in views.values())

    wait_until(f"{name}: every partition led with its ISR", led)
    return name


def throughput_brokers_first(hosts: Hosts, plan: Plan, rf1: str, rf3: str) -> dict[str, Any]:
    """`throughput` with the producers' threads at nice 19, so that the brokers get the
    cores first, as on machines of their own: on these shared cores the producers'
    CPU per record (librdkafka's threads waiting on acks=all answers) grows as the
    answers slow, and takes the brokers' share. On Linux a nice value is a thread's:
    this one's, and that of every thread it starts (the producers' and librdkafka's),
    nothing else of this process."""
    rows: list[dict[str, Any]] = []

    def niced() -> None:
        os.nice(19)
        rows.append(throughput(hosts, plan, rf1, rf3, producers="2 producers at nice 19"))

    thread = threading.Thread(target=niced)
    thread.start()
    thread.join()
    if not rows:
        raise RuntimeError("the niced throughput slices failed (see above)")
    return rows[0]


def throughput(
    hosts: Hosts, plan: Plan, rf1: str, rf3: str, producers: str = "2 producers"
) -> dict[str, Any]:
    bursts = {
        1: Burst(hosts.bootstrap, rf1, PARTITIONS),
        3: Burst(hosts.bootstrap, rf3, PARTITIONS),
    }
    for burst in bursts.values():
        burst.connect()
    # Per factor: records, seconds, the brokers' CPU seconds, the producers'.
    totals = {1: [0, 0.0, 0.0, 0.0], 3: [0, 0.0, 0.0, 0.0]}
    ratios: list[float] = []
    for index in range(plan.rounds):
        rates = {}
        for factor in (1, 3) if index % 2 == 0 else (3, 1):
            cpu_before = _hosts_cpu_seconds(hosts)
            producers_before = process_cpu_seconds(os.getpid())
            records, seconds = bursts[factor].slice(plan.slice_s)
            totals[factor][0] += records
            totals[factor][1] += seconds
            totals[factor][2] += _hosts_cpu_seconds(hosts) - cpu_before
            totals[factor][3] += process_cpu_seconds(os.getpid()) - producers_before
            rates[factor] = records / seconds
        ratios.append(rates[3] / rates[1])
    rf3_rate, rf1_rate = (totals[f][0] / totals[f][1] for f in (3, 1))
    rf3_cpu_us, rf1_cpu_us = (totals[f][2] / totals[f][0] * 1e6 for f in (3, 1))
    # The producers share the machine's cores with the brokers: their CPU per record is
    # part of the throughput ratio (librdkafka's broker threads were seen calling
    # poll(2) thousands of times a second, each briefly, during replication factor 3's
    # slices, its acknowledgements slower).
    rf3_producer_us, rf1_producer_us = (totals[f][3] / totals[f][0] * 1e6 for f in (3, 1))
    ratio = rf3_rate / rf1_rate
    return _row(
        f"produce {len(VALUE)} B values, {producers}, acks=all, {PARTITIONS} partitions "
        "(one led per host): replication factor 3, min.insync.replicas=2",
        rf3_rate,
        "msgs/s",
        rf1_rate,
        "the same producers, replication factor 1",
        ratio,
        f">= {RATIO_GOAL}x",
        ratio >= RATIO_GOAL,
        _spread(ratios),
        f"{plan.rounds} slices of {plan.slice_s:g} s per factor, alternated",
        f"{rf3_rate * len(VALUE) / 1e6:.1f} MB/s vs {rf1_rate * len(VALUE) / 1e6:.1f} MB/s; "
        f"CPU of the three brokers per record: {rf3_cpu_us:.1f} µs vs {rf1_cpu_us:.1f} µs "
        f"({rf3_cpu_us / rf1_cpu_us:.2f}x); CPU of the producers (this process) per record: "
        f"{rf3_producer_us:.1f} µs vs {rf1_producer_us:.1f} µs; "
        f"load average {os.getloadavg()[0]:.1f}",
    )


def _led_followed(led: float | None, followed: float | None) -> str:
    """A host's stall on the partitions it led (clients must find the new leader) and
    on those it followed (the leaders must learn that it left the ISR)."""
    shown = [
        f"{what} {s:.2f}" for what, s in (("led", led), ("followed", followed)) if s is not None
    ]
    return ", ".join(shown)


def _phases(leaving: float, starting: float, rejoining: float) -> str:
    """The same stall while the host left (SIGTERM to exit: its leaderships moved), while
    its process started again (on this machine that start-up's CPU is the other hosts'),
    and while it rejoined (registered to full ISR)."""
    return f" (leaving {leaving:.2f}, starting {starting:.2f}, rejoining {rejoining:.2f})"


def _hosts_cpu_seconds(hosts: Hosts) -> float:
    return sum(
        process_cpu_seconds(host.process.process.pid)
        for host in hosts.hosts.values()
        if host.process is not None
    )


def rolling_restart(hosts: Hosts, plan: Plan, topic: str) -> dict[str, Any]:
    load = PacedLoad(hosts.bootstrap, topic, PARTITIONS)
    load.start()
    stalls: dict[int, float] = {}
    kinds: dict[int, tuple[float | None, float | None]] = {}
    phases: dict[int, tuple[float, float, float]] = {}
    exits: dict[int, int] = {}
    try:
        time.sleep(WARM_S)
        quiet_start = time.monotonic()
        time.sleep(plan.quiet_s)
        baseline = longest_gap(load.acked, quiet_start, time.monotonic())
        for node_id in list(hosts.hosts)[: plan.restarts]:
            host = hosts.hosts[node_id]
            led = {
                p
                for p, view in partitions(hosts.bootstrap, topic).items()
                if view.leader == node_id
            }
            stopped_at = time.monotonic()
            exits[node_id] = host.stop()
            exited_at = time.monotonic()
            host.start()
            up_at = time.monotonic()
            wait_for_full_isr(hosts, topic, PARTITIONS)
            back_at = time.monotonic()
            stalls[node_id] = longest_gap(load.acked, stopped_at, back_at)
            phases[node_id] = (
                longest_gap(load.acked, stopped_at, exited_at),
                longest_gap(load.acked, exited_at, up_at),
                longest_gap(load.acked, up_at, back_at),
            )
            followed = set(range(PARTITIONS)) - led
            kinds[node_id] = (
                longest_gap(load.acked, stopped_at, back_at, led) if led else None,
                longest_gap(load.acked, stopped_at, back_at, followed) if followed else None,
            )
    finally:
        load.stop()
    longest = max(stalls.values())
    return _row(
        "rolling restart (SIGTERM: controlled shutdown; started again; full ISR; next host): "
        "the longest time a partition went unacknowledged, per host",
        longest,
        "s",
        baseline,
        f"the same load without a restart ({plan.quiet_s:g} s)",
        longest / baseline,
        f"< {STALL_GOAL_S:g} s per host",
        longest < STALL_GOAL_S,
        "; ".join(f"host {n}: {_led_followed(*kinds[n])}{_phases(*phases[n])}" for n in stalls),
        f"{len(stalls)} hosts",
        f"exit codes {sorted(set(exits.values()))}; {len(load.failed)} records failed",
    )


def failover(hosts: Hosts, plan: Plan, topic: str) -> list[dict[str, Any]]:
    session_s = plan.session_timeout_ms / 1000
    bound_s = session_s + WAIT_S
    times: list[float] = []
    controllers = 0
    failed = 0
    for index in range(plan.kills):
        views = partitions(hosts.bootstrap, topic)
        victim = views[index % PARTITIONS].leader
        led = {p for p, view in views.items() if view.leader == victim}
        witness = next(h for n, h in hosts.hosts.items() if n != victim)
        controllers += host_metadata(witness, topic).controller_id == victim
        seconds, failures = _kill(hosts, topic, victim, led, bound_s)
        times.append(seconds)
        failed += failures
        if index < plan.kills - 1:
            hosts.hosts[victim].start()
            wait_for_full_isr(hosts, topic, PARTITIONS)
    goal_s = session_s + 2
    detail = (
        f"{controllers} of {len(times)} kills hit the controller's host; "
        f"{failed} records failed; acks=all, min.insync.replicas=2"
    )
    rows = []
    for name, value in (("p50", _percentile(times, 0.5)), ("p99", _percentile(times, 0.99))):
        rows.append(
            _row(
                f"kill -9 of a leader's host until its partitions' producers are "
                f"acknowledged again: {name}",
                value,
                "s",
                session_s,
                "zookeeper.session.timeout.ms",
                value / session_s,
                f"<= {goal_s:g} s (session timeout + 2 s)",
                value <= goal_s,
                _spread(times),
                f"{len(times)} kills",
                detail,
            )
        )
    return rows


def _kill(
    hosts: Hosts, topic: str, victim: int, led: set[int], bound_s: float
) -> tuple[float, int]:
    """`kill -9` of the victim's host under a paced load: seconds until a record of the
    `led` partitions sent after it is acknowledged (inf past `bound_s`), records failed."""
    load = PacedLoad(hosts.bootstrap, topic, PARTITIONS)
    load.start()
    try:
        time.sleep(WARM_S)
        killed_at = time.monotonic()
        hosts.hosts[victim].kill()
        with contextlib.suppress(AssertionError):
            wait_until(
                f"acks on partitions {sorted(led)} after the kill of host {victim}",
                lambda: first_ack_after(load.acked, led, killed_at) is not None,
                timeout_s=bound_s,
            )
    finally:
        load.stop()
    resumed = first_ack_after(load.acked, led, killed_at)
    return (math.inf if resumed is None else resumed - killed_at), len(load.failed)


def _row(
    measurement: str,
    measured: float,
    unit: str,
    baseline: float,
    baseline_is: str,
    ratio: float,
    goal: str,
    met: bool,
    spread: str,
    samples: str,
    notes: str,
) -> dict[str, Any]:
    return {
        "measurement": measurement,
        "measured": measured,
        "unit": unit,
        "baseline (same run)": baseline,
        "baseline is": baseline_is,
        "measured/baseline": ratio,
        "goal": goal,
        "goal met": "yes" if met else "NO",
        "spread (min / median / max) or per host": spread,
        "samples": samples,
        "notes": notes,
    }


def _spread(values: list[float]) -> str:
    return " / ".join(f"{v:.3g}" for v in (min(values), statistics.median(values), max(values)))


def _percentile(values: list[float], fraction: float) -> float:
    """Nearest rank: over 10 samples the p99 is the worst."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


if __name__ == "__main__":
    # python -m bench.bench_replication [slice seconds] [throughput|rolling|failover ...]
    #     [--repeat N]
    # (`rolling` alone: the rolling-restart row; `--repeat 6`: six rolling restarts.)
    args = sys.argv[1:]
    seconds = float(args.pop(0)) if args and args[0].replace(".", "", 1).isdigit() else 3.0
    repeat = 1
    if "--repeat" in args:
        at = args.index("--repeat")
        repeat = int(args[at + 1])
        del args[at : at + 2]
    for row in run(seconds, only=frozenset(args), repeat=repeat):
        print(row, "load average", os.getloadavg())
