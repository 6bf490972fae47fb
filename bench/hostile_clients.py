"""Hostile clients and a well-behaved bystander, for the hostile-load benchmark and tests.

Each attack is what a black-box probe against `broker serve` does, bounded in count and
time: connections pipelining large frames without reading their responses, slow senders
trickling a large frame, and random or mutated frames. The bystander times
ApiVersions+Metadata on its own connection; the producer counts acknowledged records so
that a run can check none were lost.
"""

from __future__ import annotations

import os
import random
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import trio

from broker.client.connection import ConnectionClosed, KafkaConnection
from broker.protocol import records as rec
from broker.protocol.api import RequestHeader, encode_request
from broker.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from broker.protocol.messages.create_topics_request import CreatableTopic
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hhi")
BYSTANDER_TIMEOUT_S = 5.0


def frame_of(body: Any, version: int, correlation_id: int = 1, client_id: str = "probe") -> bytes:
    """A whole size-prefixed request frame."""
    header = RequestHeader(
        api_key=int(body.API_KEY),
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return b"".join(bytes(c) for c in encode_request(header, body))


def produce_body(topic: str, values: list[bytes], acks: int) -> ProduceRequest:
    batch = rec.encode_batch(
        [
            rec.Record(offset_delta=i, timestamp_delta=0, key=None, value=v)
            for i, v in enumerate(values)
        ]
    )
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )


def large_produce_frame(topic: str, frame_bytes: int) -> bytes:
    """An acks=1 Produce of one record, about `frame_bytes` long on the wire."""
    return frame_of(produce_body(topic, [os.urandom(max(frame_bytes - 200, 1))], acks=1), 9)


async def create_topic(port: int, name: str) -> None:
    async with await KafkaConnection.connect("127.0.0.1", port) as conn:
        topic = CreatableTopic(name=name, num_partitions=1, replication_factor=1, configs=())
        await conn.request(CreateTopicsRequest(topics=(topic,), timeout_ms=5000), 7)


async def log_end_offset(port: int, topic: str) -> int:
    async with await KafkaConnection.connect("127.0.0.1", port) as conn:
        partition = ListOffsetsPartition(partition_index=0, timestamp=-1)
        response = await conn.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=(ListOffsetsTopic(name=topic, partitions=(partition,)),),
            ),
            7,
        )
        return int(response.topics[0].partitions[0].offset)


# -- the well-behaved clients ---------------------------------------------------------


async def bystander(port: int, deadline: float, latencies: list[float], pause_s: float) -> None:
    """ApiVersions then Metadata on one connection, timed per pair, until `deadline`
    (trio clock). A pair not answered within BYSTANDER_TIMEOUT_S counts as that long
    and opens a fresh connection."""
    conn: KafkaConnection | None = None
    try:
        while trio.current_time() < deadline:
            started = time.perf_counter()
            with trio.move_on_after(BYSTANDER_TIMEOUT_S) as scope:
                if conn is None:
                    conn = await KafkaConnection.connect("127.0.0.1", port, "bystander")
                await conn.request(ApiVersionsRequest(), 3)
                await conn.request(MetadataRequest(topics=None), 9)
            if scope.cancelled_caught:
                latencies.append(BYSTANDER_TIMEOUT_S)
                if conn is not None:
                    await conn.aclose()
                conn = None
            else:
                latencies.append(time.perf_counter() - started)
            await trio.sleep(pause_s)
    finally:
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()


async def new_clients(port: int, deadline: float, answers: list[float], pause_s: float) -> None:
    """A new connection every `pause_s` until `deadline`, each timed from connect to its
    first answer (ApiVersions), then closed; one not answered within BYSTANDER_TIMEOUT_S
    counts as that long."""
    while trio.current_time() < deadline:
        started = time.perf_counter()
        answered = False
        with trio.move_on_after(BYSTANDER_TIMEOUT_S):
            try:
                async with await KafkaConnection.connect("127.0.0.1", port, "newcomer") as conn:
                    await conn.request(ApiVersionsRequest(), 3)
                    answered = True
            except (OSError, ConnectionClosed, trio.BrokenResourceError):
                pass
        answers.append(time.perf_counter() - started if answered else BYSTANDER_TIMEOUT_S)
        await trio.sleep(pause_s)


@attrs.define
class ProducerTally:
    acknowledged: int = 0
    failed: int = 0


async def acks_all_producer(port: int, topic: str, deadline: float, tally: ProducerTally) -> None:
    """Produce one small record at a time with acks=all, counting acknowledgements."""
    async with await KafkaConnection.connect("127.0.0.1", port, "producer") as conn:
        n = 0
        while trio.current_time() < deadline:
            body = produce_body(topic, [b"record-%d" % n], acks=-1)
            with trio.move_on_after(BYSTANDER_TIMEOUT_S):
                response = await conn.request(body, 9)
                if response.responses[0].partition_responses[0].error_code == 0:
                    tally.acknowledged += 1
                else:
                    tally.failed += 1
            n += 1
            await trio.sleep(0.01)


# -- attack 1: pipelined large frames, responses never read -----------------------------


async def pipeline_without_reading(
    port: int, frame: bytes, connections: int, deadline: float, sent: list[int]
) -> None:
    """Each connection writes `frame` back to back and never reads, until `deadline`."""

    async def one() -> None:
        with trio.move_on_at(deadline):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            try:
                while True:
                    await stream.send_all(frame)
                    sent[0] += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            finally:
                await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(one)


# -- attack 1b: large fetches, responses never read ------------------------------------


def large_fetch_frame(topic: str, max_bytes: int) -> bytes:
    """A Fetch (v11) from offset 0 of partition 0 that may answer up to `max_bytes`."""
    return frame_of(fetch_body(topic, max_bytes), 11)


def fetch_body(topic: str, max_bytes: int) -> FetchRequest:
    partition = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=max_bytes)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(partition,)),),
    )


async def fill_topic(
    port: int, topic: str, total_bytes: int, record_bytes: int = 512 * 1024
) -> int:
    """Append about `total_bytes` of incompressible records (acks=1); returns how many."""
    records = 0
    async with await KafkaConnection.connect("127.0.0.1", port, "filler") as conn:
        while records * record_bytes < total_bytes:
            await conn.request(produce_body(topic, [os.urandom(record_bytes)], acks=1), 9)
            records += 1
    return records


async def fetch_without_reading(
    port: int, frame: bytes, connections: int, deadline: float, sent: list[int]
) -> None:
    """Each connection writes the Fetch `frame` back to back and never reads its
    responses, until `deadline`: each large response waits in the broker until written."""
    await pipeline_without_reading(port, frame, connections, deadline, sent)


# -- attack 2: slow senders -----------------------------------------------------------------


async def slow_senders(
    port: int,
    connections: int,
    frame_size: int,
    byte_interval_s: float,
    deadline: float,
    closed_after: list[float],
) -> None:
    """Each connection sends a size prefix, then one byte every `byte_interval_s`; records
    how long after its first byte the broker closed it (connections still open at
    `deadline` record nothing)."""

    async def one() -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        started = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:

                async def trickle() -> None:
                    try:
                        await stream.send_all(_SIZE.pack(frame_size))
                        while True:
                            await trio.sleep(byte_interval_s)
                            await stream.send_all(b"x")
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        await trio.sleep_forever()

                nursery.start_soon(trickle)
                with trio.move_on_at(deadline):
                    try:
                        while await stream.receive_some(4096):
                            pass
                    except (trio.BrokenResourceError, OSError):
                        pass
                    closed_after.append(trio.current_time() - started)
                nursery.cancel_scope.cancel()
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(one)


# -- attack 3: hostile frames -------------------------------------------------------------------


def _valid_frames(topic: str) -> list[bytes]:
    metadata = MetadataRequest(topics=(MetadataRequestTopic(name=topic),))
    fetch = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),),
            ),
        ),
    )
    return [
        frame_of(produce_body(topic, [b"hostile"], acks=1), 9),
        frame_of(fetch, 12),
        frame_of(metadata, 9),
        frame_of(ApiVersionsRequest(), 3),
    ]


def hostile_frames(topic: str, seed: int, max_request_bytes: int) -> Iterator[bytes]:
    """An endless mix of bad frames: random bytes, every api key and version with a random
    body, truncated frames, oversized and negative sizes, and mutated valid requests."""
    rng = random.Random(seed)
    valid = _valid_frames(topic)
    kinds: list[Callable[[], bytes]] = []

    def random_bytes() -> bytes:
        payload = rng.randbytes(rng.randrange(0, 256))
        return _SIZE.pack(len(payload)) + payload

    def random_api() -> bytes:
        header = _KEY_VERSION.pack(rng.randrange(-2, 80), rng.randrange(-1, 20), 7)
        body = header + rng.randbytes(rng.randrange(0, 200))
        return _SIZE.pack(len(body)) + body

    def truncated() -> bytes:
        full = rng.choice(valid)
        return full[: rng.randrange(1, len(full))]

    def oversized() -> bytes:
        return _SIZE.pack(rng.choice([max_request_bytes + 1, 2**31 - 1, -1, -(2**31)])) + b"x"

    def mutated() -> bytes:
        frame = bytearray(rng.choice(valid))
        for _ in range(rng.randrange(1, 8)):
            position = rng.randrange(4, len(frame))
            frame[position] = rng.randrange(256)
        return bytes(frame)

    kinds = [random_bytes, random_api, truncated, oversized, mutated]
    while True:
        yield rng.choice(kinds)()


async def send_hostile_frames(
    port: int,
    frames: Iterator[bytes],
    count: int,
    deadline: float,
    tasks: int,
    sent: list[int],
    rate_per_s: float | None = None,
) -> None:
    """Up to `count` frames, each on its own connection (a bad frame gets the connection
    closed), from `tasks` concurrent senders, until `deadline`; at most `rate_per_s`
    frames a second in all when given (an open loop: the same attack whatever the
    broker's speed), else each sender starts its next frame when the last is done."""
    interval = tasks / rate_per_s if rate_per_s else 0.0

    async def one(index: int) -> None:
        # Senders staggered evenly over the interval: a steady stream, not bursts.
        next_start = trio.current_time() + interval * index / tasks
        while sent[0] < count and trio.current_time() < deadline:
            if interval:
                await trio.sleep_until(next_start)
                next_start += interval
            frame = next(frames)
            sent[0] += 1
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.01)
                continue
            try:
                await stream.send_all(frame)
                await stream.send_eof()
                with trio.move_on_after(1.0):
                    while await stream.receive_some(65536):
                        pass
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            finally:
                await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        for index in range(tasks):
            nursery.start_soon(one, index)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far, from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_TCP_STATES = {
    "01": "ESTABLISHED",
    "02": "SYN_SENT",
    "03": "SYN_RECV",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "06": "TIME_WAIT",
    "07": "CLOSE",
    "08": "CLOSE_WAIT",
    "09": "LAST_ACK",
    "0A": "LISTEN",
    "0B": "CLOSING",
}


def tcp_socket_states(pid: int) -> Counter[str]:
    """The TCP sockets process `pid` holds, counted by state.

    /proc/<pid>/net/tcp lists every socket of the process's network namespace (other
    processes' too); those whose inode is one of the process's file descriptors are its
    own. A socket the process has closed is not counted whatever its state (TIME_WAIT
    belongs to the kernel)."""
    inodes: set[str] = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    states: Counter[str] = Counter()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as rows:
                next(rows)  # the header
                for row in rows:
                    fields = row.split()
                    if fields[9] in inodes:
                        states[_TCP_STATES.get(fields[3], fields[3])] += 1
        except FileNotFoundError:
            continue
    return states


async def sample_rss(pid: int, deadline: float, peak: list[int], interval_s: float = 0.05) -> None:
    while trio.current_time() < deadline:
        try:
            peak[0] = max(peak[0], rss_bytes(pid))
        except OSError:
            return
        await trio.sleep(interval_s)


__all__ = [
    "ConnectionClosed",
    "ProducerTally",
    "acks_all_producer",
    "bystander",
    "cpu_seconds",
    "create_topic",
    "hostile_frames",
    "large_produce_frame",
    "log_end_offset",
    "new_clients",
    "percentile",
    "pipeline_without_reading",
    "rss_bytes",
    "sample_rss",
    "send_hostile_frames",
    "slow_senders",
    "tcp_socket_states",
]
