"""A consumer group consuming through the faults: confluent-kafka consumers in threads,
each subscribing to the topic, committing every record it is given synchronously, and
noting it all in a `ConsumedHistory` for `consumed_records.resumption_anomalies`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import attrs
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from tests.hosts.consumed_records import ConsumedHistory, GroupEvent, Kind

LIFETIME_S = 120.0  # no member consumes longer, whatever the test does
STOP_S = 30.0


@attrs.define
class GroupConsumers:
    servers: str
    topic: str
    group: str
    history: ConsumedHistory = attrs.field(factory=ConsumedHistory)
    _stopping: threading.Event = attrs.field(factory=threading.Event)
    _threads: dict[str, threading.Thread] = attrs.field(factory=dict)

    def add(self, member: str) -> None:
        """One more member, joining the group from its own thread."""
        thread = threading.Thread(target=self._consume, args=(member,), name=member, daemon=True)
        self._threads[member] = thread
        thread.start()

    def holding(self, member: str) -> set[int]:
        """The partitions the member holds now."""
        held: set[int] = set()
        for event in list(self.history.events):
            if event.member == member and event.kind is Kind.ASSIGNED:
                held.add(event.partition)
            elif event.member == member and event.kind is Kind.REVOKED:
                held.discard(event.partition)
        return held

    def stop(self) -> None:
        """Every member leaves the group (closes its consumer)."""
        self._stopping.set()
        for member, thread in self._threads.items():
            thread.join(STOP_S)
            assert not thread.is_alive(), f"consumer {member} did not stop"

    def _consume(self, member: str) -> None:
        note = self.history.note

        def noted(kind: Kind) -> Callable[[Consumer, list[TopicPartition]], None]:
            def on_change(_: Consumer, partitions: list[TopicPartition]) -> None:
                for tp in partitions:
                    note(GroupEvent(time.monotonic(), member, kind, tp.partition))

            return on_change

        consumer = Consumer(
            {
                "bootstrap.servers": self.servers,
                "group.id": self.group,
                "client.id": member,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": 30000,
                "socket.timeout.ms": 10000,
                "topic.metadata.refresh.interval.ms": 1000,
                "reconnect.backoff.max.ms": 500,
                "fetch.wait.max.ms": 100,
            }
        )
        revoked = noted(Kind.REVOKED)
        consumer.subscribe(
            [self.topic], on_assign=noted(Kind.ASSIGNED), on_revoke=revoked, on_lost=revoked
        )
        deadline = time.monotonic() + LIFETIME_S
        try:
            while not self._stopping.is_set() and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    self._take(consumer, member, message)
        finally:
            consumer.close()

    def _take(self, consumer: Consumer, member: str, message: Message) -> None:
        partition, offset, value = message.partition(), message.offset(), message.value()
        assert partition is not None and offset is not None and value is not None
        note = self.history.note
        note(GroupEvent(time.monotonic(), member, Kind.DELIVERED, partition, offset, value))
        note(GroupEvent(time.monotonic(), member, Kind.COMMIT_SENT, partition, offset + 1))
        try:
            committed = consumer.commit(message=message, asynchronous=False)
        except KafkaException:
            return  # not confirmed: it may or may not have been written
        if committed and all(tp.error is None for tp in committed):
            note(GroupEvent(time.monotonic(), member, Kind.COMMIT_CONFIRMED, partition, offset + 1))
