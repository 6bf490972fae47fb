"""A checker in the spirit of Jepsen for records produced through faults (sans-IO).

Producers note every value they send and every acknowledgement they get (the
partition and offset the broker answered); after the faults every partition is read
back from the cluster, and `anomalies` compares the two histories:

- an acknowledged record is in its partition exactly once, at the offset it was
  acknowledged with (a record that moved was dropped and written again: the
  acknowledgement promised it where it was);
- no value is read that was never sent, none twice;
- each producer's values in a partition are in the order it sent them.

Values sent but never acknowledged (a timeout, a leader lost with the request in flight)
may or may not be there: a record is acknowledged only once it is durable, never the
other way round. Values are `<producer>-<sequence>` so that the order of sending is in
the value itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import attrs


@attrs.frozen
class SentValue:
    producer: str
    sequence: int

    def encode(self) -> bytes:
        return f"{self.producer}-{self.sequence}".encode()

    @classmethod
    def decode(cls, value: bytes) -> SentValue | None:
        producer, _, sequence = value.decode(errors="replace").rpartition("-")
        return cls(producer, int(sequence)) if producer and sequence.isdigit() else None


@attrs.frozen
class Acknowledgement:
    partition: int
    # None: acknowledged without an offset. librdkafka's idempotent producer acknowledges
    # earlier records implicitly when a later batch of the partition succeeds while their
    # own answer was lost (rd_kafka_dr_implicit_ack): durable, where is not said.
    offset: int | None
    at: float  # when it arrived (time.monotonic()), for the failover times


@attrs.define
class ProducedHistory:
    """What the producers sent and what the cluster acknowledged (filled from producer
    threads' delivery callbacks: one history per producer, merged with `merge`)."""

    sent: set[bytes] = attrs.field(factory=set)
    sent_at: dict[bytes, float] = attrs.field(factory=dict)
    acknowledged: dict[bytes, Acknowledgement] = attrs.field(factory=dict)
    failed: dict[bytes, str] = attrs.field(factory=dict)

    def on_sent(self, value: bytes, at: float = 0.0) -> None:
        self.sent.add(value)
        self.sent_at[value] = at

    def on_acknowledged(self, value: bytes, partition: int, offset: int | None, at: float) -> None:
        self.acknowledged[value] = Acknowledgement(partition, offset, at)

    def on_failed(self, value: bytes, error: str) -> None:
        self.failed[value] = error

    def merge(self, other: ProducedHistory) -> None:
        self.sent |= other.sent
        self.sent_at.update(other.sent_at)
        self.acknowledged.update(other.acknowledged)
        self.failed.update(other.failed)

    def first_acknowledged_after(self, partitions: set[int], moment: float) -> float | None:
        """When the first record of `partitions` sent after `moment` was acknowledged
        (records sent before may have been acknowledged before it, and only read after)."""
        later = [
            acked.at
            for value, acked in list(self.acknowledged.items())
            if acked.partition in partitions and self.sent_at.get(value, 0.0) > moment
        ]
        return min(later) if later else None


ReadBack = Mapping[int, Sequence[tuple[int, bytes]]]
"""Every partition's records as read back: (offset, value) in offset order."""


def anomalies(history: ProducedHistory, read: ReadBack) -> list[str]:
    """Everything the read-back log breaks of the history's promises; empty when none."""
    found: list[str] = []
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in read.items():
        last_sequence: dict[str, int] = {}
        for offset, value in records:
            where[value].append((partition, offset))
            sent = SentValue.decode(value)
            if value not in history.sent or sent is None:
                found.append(f"{value!r} at {partition}/{offset} was never sent")
                continue
            before = last_sequence.get(sent.producer)
            if before is not None and sent.sequence < before:
                found.append(
                    f"{value!r} at {partition}/{offset} follows {sent.producer}-{before}: "
                    "out of producing order"
                )
            last_sequence[sent.producer] = sent.sequence
    for value, places in where.items():
        if len(places) > 1:
            found.append(f"{value!r} is there {len(places)} times: {places}")
    for value, acked in history.acknowledged.items():
        places = where.get(value, [])
        if not places:
            found.append(f"{value!r} acknowledged at {acked.partition}/{acked.offset} is lost")
        elif acked.offset is None:
            if all(partition != acked.partition for partition, _ in places):
                found.append(
                    f"{value!r} acknowledged in partition {acked.partition} is at {places}"
                )
        elif (acked.partition, acked.offset) not in places:
            found.append(
                f"{value!r} acknowledged at {acked.partition}/{acked.offset} is at {places}"
            )
    return sorted(found)
