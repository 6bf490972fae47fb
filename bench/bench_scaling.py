"""Scaling with cores: one broker process against a cluster of `process.count` processes.

For N = 1 and N = the number of cores the broker may use (`process.count=0`), K = 1, 2,
4, 8 client processes (spawned, each with its own librdkafka or Trio client) drive:

- produce: 1 KiB records, acks=all, keyless, to a topic of 16 partitions (leaders spread
  over the processes);
- consume: assign()ed consumers, each reading its share of the partitions from the
  start of what the produce runs wrote;
- small requests: ApiVersions v0, 64 connections x 5 pipelined in all, spread over the
  processes' ports (any broker answers ApiVersions).

Each row gives the aggregate throughput and the CPU each broker process used while the
clients ran (% of one core; the supervisor, idle, is not counted). A consumer stops at the
end of its partitions, so consume rows with many clients can finish before the duration.

On a bigger machine, pin the broker and the clients to separate cores, e.g. on 16
cores (broker on 0-7, so process.count=0 gives 8 processes; clients on 8-15):

    BENCH_BROKER_CPUS=0-7 BENCH_CLIENT_CPUS=8-15 \\
        .venv/bin/python -m bench --only bench_scaling --duration 10 --output /tmp/scaling.md

On 2 cores the broker and its clients share the same two cores, so the figures say
little about scaling; the table shows the benchmark runs and what it measures.

`versus_tansu` (`python -m bench.bench_scaling tansu`) is issue 19's "produce with 8
producers against tansu": the same 8 producer processes against our broker (1 process,
and `process.count=0`) and tansu, in alternated slices (ours, tansu, tansu, ours, ...), so
a change in what else the machine runs falls on all alike; the throughput ratio and each
broker's CPU per record.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.servers import pinned_prefix, source_prefix, tansu_binary, tansu_broker_process

CLIENT_COUNTS = (1, 2, 4, 8)
PARTITIONS = 16
VALUE = b"x" * 1024
MAX_PRODUCE_BYTES = 256 * 1024 * 1024
CONNECTIONS = 64
DEPTH = 5
START_MARGIN_S = 1.0
_REGISTERED = re.compile(r"node (\d+) registered in the cluster at \{'\w+': \('[^']*', (\d+)\)")
_LISTENING = re.compile(r"listening on PLAINTEXT://[^ ]*:(\d+)")


def parse_cpus(text: str | None) -> set[int] | None:
    """`0-7,12` -> {0..7, 12}; None or empty: no pinning."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def broker_cpus() -> set[int] | None:
    return parse_cpus(os.environ.get("BENCH_BROKER_CPUS"))


def client_cpus() -> set[int] | None:
    return parse_cpus(os.environ.get("BENCH_CLIENT_CPUS"))


def cluster_size() -> int:
    """What `process.count=0` gives the broker: the cores it may run on."""
    return len(broker_cpus() or os.sched_getaffinity(0))


# --- the broker ------------------------------------------------------------------------------


class Broker:
    def __init__(self, process: subprocess.Popen[bytes], log: Path, count: int) -> None:
        self.process = process
        self.log = log
        self.count = count

    def ports(self) -> list[int]:
        text = self.log.read_text()
        if self.count == 1:
            return [int(m.group(1)) for m in _LISTENING.finditer(text)][:1]
        return [int(p) for _, p in sorted({n: p for n, p in _REGISTERED.findall(text)}.items())]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports())

    def pids(self) -> list[int]:
        """The broker processes (a cluster's children; the single process itself)."""
        if self.count == 1:
            return [self.process.pid]
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    stat = (entry / "stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == self.process.pid:
                        children.append(int(entry.name))
        return sorted(children)


@contextlib.contextmanager
def running_broker(work: Path, count: int, source: Path | None = None) -> Iterator[Broker]:
    """`count` broker processes (a cluster when over 1); `source`: another source tree's
    broker (issue 19's code before its redesign: `BENCH_OLD_TREE`), with this interpreter."""
    args = [*source_prefix(source), sys.executable, "-m", "broker", "serve"]
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(work / "data"),
        "metrics.port": "-1",
        "process.count": str(count),
        "num.partitions": str(PARTITIONS),
    }
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    args = [*pinned_prefix(broker_cpus()), *args]
    log = work / f"broker-{count}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    ready = "started" if count == 1 else "broker processes started"
    deadline = time.monotonic() + 60
    broker = Broker(process, log, count)
    try:
        while ready not in log.read_text() or len(broker.ports()) < count:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        yield broker
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_times(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds (0 for a process that has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


# --- the clients (each in its own spawned process) ---------------------------------------------


def _pin_client() -> None:
    cpus = client_cpus()
    if cpus:
        os.sched_setaffinity(0, cpus)


def _settings(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "socket.connection.setup.timeout.ms": 5000,
        "log_level": 3,
    }


def _wait(start_at: float) -> None:
    time.sleep(max(0.0, start_at - time.time()))


def produce_client(
    bootstrap: str, topic: str, start_at: float, duration_s: float, max_bytes: int
) -> dict[str, float]:
    from confluent_kafka import Producer

    producer = Producer(
        _settings(bootstrap) | {"acks": "all", "linger.ms": 5, "batch.size": 262144}
    )
    delivered = 0

    def report(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1

    _wait(start_at)
    started = time.perf_counter()
    deadline = started + duration_s
    limit = max_bytes // len(VALUE)
    sent = 0
    while time.perf_counter() < deadline and sent < limit:
        try:
            producer.produce(topic, VALUE, on_delivery=report)
            sent += 1
        except BufferError:
            producer.poll(0.001)
        if sent % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - started
    return {"bytes": delivered * len(VALUE), "messages": delivered, "elapsed": elapsed}


def consume_client(
    bootstrap: str, topic: str, partitions: list[int], start_at: float, duration_s: float
) -> dict[str, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        _settings(bootstrap)
        | {
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    _wait(start_at)
    started = time.perf_counter()
    deadline = started + duration_s
    size = messages = 0
    ended: set[int] = set()
    while time.perf_counter() < deadline and len(ended) < len(partitions):
        for msg in consumer.consume(num_messages=10000, timeout=0.1):
            error = msg.error()
            if error is None:
                size += len(msg.value() or b"")
                messages += 1
            elif error.code() == -191:  # _PARTITION_EOF
                ended.add(msg.partition() or 0)
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"bytes": size, "messages": messages, "elapsed": elapsed}


def requests_client(
    ports: list[int], connections: int, offset: int, start_at: float, duration_s: float
) -> dict[str, float]:
    import trio

    from bench.bench_network import _connection, request_bytes
    from broker.protocol.messages import ApiVersionsRequest

    template = request_bytes(ApiVersionsRequest(), 0)

    async def main() -> dict[str, float]:
        counts: list[int] = []
        latencies: list[float] = []
        _wait(start_at)
        started = time.perf_counter()
        deadline = started + duration_s

        async def one(port: int) -> None:
            counts.append(await _connection(port, template, DEPTH, deadline, latencies))

        with trio.fail_after(duration_s + 30):
            async with trio.open_nursery() as nursery:
                for index in range(connections):
                    nursery.start_soon(one, ports[(offset + index) % len(ports)])
        return {"messages": float(sum(counts)), "elapsed": time.perf_counter() - started}

    return trio.run(main)


# --- the measurements ----------------------------------------------------------------------------


def _create_topic(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"scaling-{uuid.uuid4().hex[:10]}"
    client = AdminClient(_settings(bootstrap))  # alive until the future resolves
    futures = client.create_topics(
        [NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)], request_timeout=30
    )
    futures[name].result(timeout=30)
    return name


def _measure(
    pool: concurrent.futures.ProcessPoolExecutor,
    pids: list[int],
    clients: int,
    job: Any,
    args_for: Any,
    duration_s: float,
) -> tuple[list[dict[str, float]], list[float], list[float]]:
    """Runs `job` in `clients` processes from one start time; returns their results and
    each broker process's CPU seconds in all and in the kernel (system time)."""
    start_at = time.time() + START_MARGIN_S
    futures = [pool.submit(job, *args_for(k, start_at)) for k in range(clients)]
    time.sleep(max(0.0, start_at - time.time()))
    before = [cpu_times(p) for p in pids]
    results = [f.result(timeout=duration_s + 120) for f in futures]
    after = [cpu_times(p) for p in pids]
    # CPU seconds; the rows divide by the clients' measured time (the broker idles after).
    cpu = [sum(a) - sum(b) for a, b in zip(after, before, strict=True)]
    system = [a[1] - b[1] for a, b in zip(after, before, strict=True)]
    return results, cpu, system


def _row(
    workload: str, count: int, clients: int, results: list[dict[str, float]], cpu: list[float]
) -> dict[str, Any]:
    elapsed = max(r["elapsed"] for r in results) or 1e-9
    cpu_total_s = sum(cpu)
    cpu = [100 * seconds / elapsed for seconds in cpu]
    row: dict[str, Any] = {
        "workload": workload,
        "broker processes": count,
        "client processes": clients,
    }
    if workload == "small requests":
        requests = sum(r["messages"] for r in results)
        row["req/s"] = round(requests / elapsed)
        # The per-core cost: broker CPU per round trip, whatever the number of processes.
        row["broker CPU µs/request"] = round(cpu_total_s / max(requests, 1) * 1e6, 1)
    else:
        row["MB/s"] = round(sum(r["bytes"] for r in results) / elapsed / 1e6, 1)
        row["msgs/s"] = round(sum(r["messages"] for r in results) / elapsed)
    row["broker CPU % (total)"] = round(sum(cpu))
    row["broker CPU % per process"] = "/".join(str(round(c)) for c in cpu)
    return row


def measure(work: Path, count: int, duration_s: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn")
    with (
        running_broker(work, count) as broker,
        concurrent.futures.ProcessPoolExecutor(
            max(CLIENT_COUNTS), mp_context=context, initializer=_pin_client
        ) as pool,
    ):
        bootstrap = broker.bootstrap
        ports = broker.ports()
        # Start every worker (imports, librdkafka) before anything is timed.
        list(pool.map(time.sleep, [0.1] * max(CLIENT_COUNTS)))
        largest = ""
        for clients in CLIENT_COUNTS:
            topic = _create_topic(bootstrap)
            largest = topic
            results, cpu, _ = _measure(
                pool,
                broker.pids(),
                clients,
                produce_client,
                lambda k, at, t=topic, n=clients: (
                    bootstrap,
                    t,
                    at,
                    duration_s,
                    MAX_PRODUCE_BYTES // n,
                ),
                duration_s,
            )
            rows.append(_row("produce 1 KiB", count, clients, results, cpu))
        for clients in CLIENT_COUNTS:
            results, cpu, _ = _measure(
                pool,
                broker.pids(),
                clients,
                consume_client,
                lambda k, at, n=clients: (
                    bootstrap,
                    largest,
                    [p for p in range(PARTITIONS) if p % n == k],
                    at,
                    duration_s,
                ),
                duration_s,
            )
            rows.append(_row("consume", count, clients, results, cpu))
        for clients in CLIENT_COUNTS:
            per_client = CONNECTIONS // clients
            results, cpu, _ = _measure(
                pool,
                broker.pids(),
                clients,
                requests_client,
                lambda k, at, c=per_client: (ports, c, k * c, at, duration_s),
                duration_s,
            )
            rows.append(_row("small requests", count, clients, results, cpu))
    return rows


def run(duration_s: float = 2.0) -> list[dict[str, Any]]:
    counts = sorted({1, cluster_size()})
    rows: list[dict[str, Any]] = []
    for count in counts:
        with tempfile.TemporaryDirectory(prefix=f"bench-scaling-{count}-") as tmp:
            rows += measure(Path(tmp), count, duration_s)
    return rows


TANSU_PRODUCERS = 8
TANSU_SLICE_BYTES = int(os.environ.get("BENCH_TANSU_SLICE_MB", "96")) * 1024 * 1024
"""What the producers of one slice send at most, together: tansu keeps every record in
memory (a machine with memory to spare can raise it: BENCH_TANSU_SLICE_MB)."""

Slices = list[tuple[float, float, float, float]]
"""One server's slices: records delivered, the clients' seconds, the broker's CPU seconds
in all and in the kernel."""


def _slice_ratios(ratios: list[float]) -> str:
    ratios = sorted(ratios)
    return f"{ratios[0]:.2f} / {ratios[len(ratios) // 2]:.2f} / {ratios[-1]:.2f}"


def versus_tansu(duration_s: float = 2.0, rounds: int = 4) -> list[dict[str, Any]]:
    """8 producer processes (1 KiB records, acks=all, 16 partitions) against our broker and
    tansu, `rounds` alternated slices each; empty without tansu. With `BENCH_OLD_TREE` (a
    source tree of the code before issue 19's redesign, as bench_old_new takes it) the old
    broker runs too, in each of the same sizes, and each row of ours gives its CPU per
    record against the old one's (issue 19's "CPU per GB produced")."""
    binary = tansu_binary()
    if binary is None:
        return []
    old_tree = os.environ.get("BENCH_OLD_TREE")
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="bench-scaling-tansu-") as tmp,
        concurrent.futures.ProcessPoolExecutor(
            TANSU_PRODUCERS, mp_context=context, initializer=_pin_client
        ) as pool,
        contextlib.ExitStack() as stack,
    ):
        list(pool.map(time.sleep, [0.1] * TANSU_PRODUCERS))
        servers: dict[str, tuple[str, list[int]]] = {}
        sources = [("ours", None)] + ([("old", Path(old_tree))] if old_tree else [])
        for count in sorted({1, cluster_size()}):
            for name, source in sources:
                work = Path(tmp) / f"{name}-{count}"
                work.mkdir()
                broker = stack.enter_context(running_broker(work, count, source))
                servers[f"{name}, {count} process{'es' if count > 1 else ''}"] = (
                    broker.bootstrap,
                    broker.pids(),
                )
        tansu_work = Path(tmp) / "tansu"
        tansu_work.mkdir()
        bootstrap, pid = stack.enter_context(
            tansu_broker_process(binary, tansu_work, broker_cpus())
        )
        servers["tansu"] = (bootstrap, [pid])
        load_before = os.getloadavg()[0]
        done: dict[str, Slices] = {name: [] for name in servers}
        for index in range(rounds):
            for name in list(servers) if index % 2 == 0 else list(servers)[::-1]:
                bootstrap, pids = servers[name]
                topic = _create_topic(bootstrap)
                results, cpu, system = _measure(
                    pool,
                    pids,
                    TANSU_PRODUCERS,
                    produce_client,
                    lambda k, at, b=bootstrap, t=topic: (
                        b,
                        t,
                        at,
                        duration_s,
                        TANSU_SLICE_BYTES // TANSU_PRODUCERS,
                    ),
                    duration_s,
                )
                elapsed = max(r["elapsed"] for r in results) or 1e-9
                records = sum(r["messages"] for r in results)
                done[name].append((records, elapsed, sum(cpu), sum(system)))
        load = f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    return _tansu_rows(done, load)


def _tansu_rows(done: dict[str, Slices], load: str) -> list[dict[str, Any]]:
    def mb_per_s(slices: Slices) -> float:
        return sum(s[0] for s in slices) * len(VALUE) / sum(s[1] for s in slices) / 1e6

    def cpu_us(slices: Slices, field: int = 2) -> float:
        return sum(s[field] for s in slices) / max(sum(s[0] for s in slices), 1.0) * 1e6

    tansu = done["tansu"]
    rows: list[dict[str, Any]] = []
    for name, slices in done.items():
        if name == "tansu":
            continue
        row: dict[str, Any] = {
            "workload": f"produce 1 KiB, {TANSU_PRODUCERS} producers, acks=all",
            "broker": name,
            "MB/s": round(mb_per_s(slices), 1),
            "tansu MB/s": round(mb_per_s(tansu), 1),
            "ratio MB/s ours/tansu": round(mb_per_s(slices) / mb_per_s(tansu), 2),
            "slice ratios (min / median / max)": _slice_ratios(
                [(o[0] / o[1]) / (t[0] / t[1]) for o, t in zip(slices, tansu, strict=True)]
            ),
            "broker CPU µs/record": round(cpu_us(slices), 2),
            "of which system": round(cpu_us(slices, 3), 2),
            "tansu CPU µs/record": round(cpu_us(tansu), 2),
        }
        old = done.get(name.replace("ours", "old"))
        if name.startswith("ours") and old is not None:
            row["CPU/record ours/old"] = round(cpu_us(slices) / cpu_us(old), 3)
            row["CPU slice ratios ours/old (min / median / max)"] = _slice_ratios(
                [
                    (n[2] / max(n[0], 1.0)) / (b[2] / max(b[0], 1.0))
                    for n, b in zip(slices, old, strict=True)
                ]
            )
        row["load average"] = load
        rows.append(row)
    return rows


if __name__ == "__main__":
    # python -m bench.bench_scaling [SECONDS] | tansu [SECONDS [ROUNDS]]
    if len(sys.argv) > 1 and sys.argv[1] == "tansu":
        for result in versus_tansu(
            float(sys.argv[2]) if len(sys.argv) > 2 else 2.0,
            int(sys.argv[3]) if len(sys.argv) > 3 else 4,
        ):
            print(result)
    else:
        for result in run(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0):
            print(result)
