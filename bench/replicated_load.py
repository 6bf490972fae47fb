"""The producers of the replication benchmark (bench/bench_replication.py) and the
figures taken from what they saw.

Two kinds of load, both confluent-kafka producers with `acks=all` and idempotence, one
thread each, bounded in count and time:

- `Burst`: as fast as librdkafka takes records, for a slice of time, counting the
  acknowledgements (throughput);
- `PacedLoad`: a fixed pace per producer until stopped, noting when each record was sent
  and when (and on which partition) it was acknowledged (failover and stall times).

The figures (`first_ack_after`, `longest_gap`) are plain functions over those notes.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import attrs
from confluent_kafka import KafkaError, Message, Producer

VALUE = b"x" * 1024
MAX_BURST_RECORDS = 2_000_000
"""Per producer and slice: the slice's time ends it long before on this machine."""
FLUSH_S = 60.0

PRODUCER_CONFIG: Mapping[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "log_level": 2,  # the kills' connection errors are expected: only critical ones
}
"""librdkafka's defaults otherwise (metadata refresh, back-offs): the failover and stall
figures are what an ordinary producer sees."""


@attrs.define
class Burst:
    """`producers` producers of one topic, kept connected between slices."""

    servers: str
    topic: str
    partitions: int
    producers: int = 2
    _clients: list[Producer] = attrs.field(factory=list)

    def connect(self) -> None:
        """Producers made and one record each acknowledged, so that no slice pays for
        connections and metadata."""
        for _ in range(self.producers):
            producer = Producer({"bootstrap.servers": self.servers, **PRODUCER_CONFIG})
            for partition in range(self.partitions):
                producer.produce(self.topic, VALUE, partition=partition)
            if producer.flush(FLUSH_S) != 0:
                raise RuntimeError(f"{self.topic}: the first records were not acknowledged")
            self._clients.append(producer)

    def slice(self, seconds: float) -> tuple[int, float]:
        """Every producer at once for `seconds`, then flushed: the records acknowledged
        and the seconds from the start to the last acknowledgement."""
        acked = [0] * len(self._clients)
        last = [0.0] * len(self._clients)
        failed: list[str] = []
        started = time.monotonic()

        def produce(index: int, producer: Producer) -> None:
            def delivered(error: KafkaError | None, _: Message) -> None:
                if error is None:
                    acked[index] += 1
                    last[index] = time.monotonic()
                else:
                    failed.append(str(error))

            deadline = started + seconds
            sent = 0
            while sent < MAX_BURST_RECORDS and time.monotonic() < deadline:
                try:
                    producer.produce(
                        self.topic, VALUE, partition=sent % self.partitions, on_delivery=delivered
                    )
                    sent += 1
                except BufferError:
                    producer.poll(0.005)
            producer.flush(FLUSH_S)

        _in_threads([(produce, (i, p)) for i, p in enumerate(self._clients)])
        if failed:
            raise RuntimeError(f"{self.topic}: {len(failed)} records failed, first: {failed[0]}")
        return sum(acked), max(last) - started


@attrs.frozen
class Acked:
    partition: int
    sent_at: float
    acked_at: float


@attrs.define
class PacedLoad:
    """Producers sending `rate` records a second each, spread over the partitions, until
    `stop()` (or `max_s`); every acknowledgement noted."""

    servers: str
    topic: str
    partitions: int
    rate: float = 100.0
    max_s: float = 300.0
    producers: int = 2
    config: Mapping[str, Any] = attrs.field(factory=dict)
    """librdkafka settings over PRODUCER_CONFIG."""
    acked: list[Acked] = attrs.field(factory=list)
    failed: list[str] = attrs.field(factory=list)
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _threads: list[threading.Thread] = attrs.field(factory=list)

    def start(self) -> None:
        for _ in range(self.producers):
            thread = threading.Thread(target=self._produce, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(FLUSH_S + 10)

    def _produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.servers,
                "message.timeout.ms": 60000,
                **PRODUCER_CONFIG,
                **self.config,
            }
        )
        started = time.monotonic()
        count = int(self.rate * self.max_s)
        for sequence in range(count):
            if self._stop.is_set():
                break
            sent_at = time.monotonic()
            partition = sequence % self.partitions

            def delivered(
                error: KafkaError | None, message: Message, sent_at: float = sent_at
            ) -> None:
                if error is None:
                    self.acked.append(Acked(message.partition() or 0, sent_at, time.monotonic()))
                else:
                    self.failed.append(str(error))

            producer.produce(self.topic, VALUE, partition=partition, on_delivery=delivered)
            next_at = started + (sequence + 1) / self.rate
            while (left := next_at - time.monotonic()) > 0:
                producer.poll(left)
        producer.flush(FLUSH_S)


def first_ack_after(acked: Iterable[Acked], partitions: set[int], moment: float) -> float | None:
    """When the first record of `partitions` sent after `moment` was acknowledged."""
    return min(
        (a.acked_at for a in acked if a.partition in partitions and a.sent_at > moment),
        default=None,
    )


def longest_gap(
    acked: Iterable[Acked], start: float, end: float, partitions: Collection[int] | None = None
) -> float:
    """The longest time any one partition (of `partitions`, None: all) went without an
    acknowledgement within [start, end]: a partition stalled while the others carried on
    counts."""
    by_partition: dict[int, list[float]] = {p: [] for p in partitions or ()}
    for a in acked:
        if partitions is None or a.partition in partitions:
            by_partition.setdefault(a.partition, []).append(a.acked_at)
    longest = 0.0
    for times in by_partition.values():
        moments = [start, *sorted(t for t in times if start < t < end), end]
        longest = max(longest, *(b - a for a, b in itertools.pairwise(moments)))
    return longest


def _in_threads(work: list[tuple[Any, tuple[Any, ...]]]) -> None:
    threads = [threading.Thread(target=target, args=args) for target, args in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
