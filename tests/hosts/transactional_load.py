"""The fault tests' transactional load and its read_committed read-back, over
confluent-kafka: one transactional producer in a thread writing transactions over every
partition of a topic at a bounded pace, most committed and every fourth aborted, noting
each in a `TransactionHistory` (`committed_transactions.py` checks the read-back).

It handles errors as an application would (librdkafka's transactional API): a retriable
error on commit or abort is retried; an error that requires an abort is answered with
abort_transaction, and a transaction meant to commit is then written again as a new
one; a fatal error, or retries run out with the commit asked for, leaves the outcome
unknown and a new producer with the same transactional.id fences the old one (its
InitProducerId completes or aborts what the old one left, all or nothing).
"""

from __future__ import annotations

import threading
import time

import attrs
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.hosts.committed_transactions import Outcome, TransactionalValue, TransactionHistory
from tests.hosts.host_processes import WAIT_S, wait_until

RECORDS_PER_PARTITION = 2
CALL_TIMEOUT_S = 10.0
"""Each transactional call's bound; one that runs past it fails retriable and is retried."""
RETRIES = 4
TRANSACTION_TIMEOUT_S = 6.0
"""About a failover's length (the fault tests' session timeout is 5 s): transactions and
their records (librdkafka's message.timeout.ms follows it) time out through the faults
too, so the coordinator aborts some and the producer meets abortable errors."""


class _GaveUp(Exception):
    """The producer cannot go on: fatal, or retries run out (a new one is needed)."""


@attrs.define
class TransactionalLoad:
    """`count` transactions over `duration_s` (at most `duration_s` + WAIT_S in all)."""

    servers: str
    topic: str
    partition_count: int
    count: int
    duration_s: float
    transactional_id: str
    history: TransactionHistory = attrs.field(factory=TransactionHistory)
    errors: list[str] = attrs.field(factory=list)  # every error met, for the failure message
    crashed: list[str] = attrs.field(factory=list)  # what ended the thread early, if anything
    _producer: Producer | None = None
    _thread: threading.Thread | None = None

    def initialize(self) -> None:
        """InitProducerId (the first creates `__transaction_state`), done before the
        transactions start so that the faults meet transactions, not the producer's start."""
        self._producer = self._new_producer()

    def start(self) -> None:
        if self._producer is None:
            self.initialize()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def join(self) -> TransactionHistory:
        assert self._thread is not None
        self._thread.join(self.duration_s + 2 * WAIT_S)
        assert not self._thread.is_alive(), "the transactional producer did not finish"
        return self.history

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.servers,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": int(TRANSACTION_TIMEOUT_S * 1000),
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        for _ in range(RETRIES):
            try:
                producer.init_transactions(CALL_TIMEOUT_S)
                return producer
            except KafkaException as exc:
                self.errors.append(f"init_transactions: {exc.args[0]}")
                if not exc.args[0].retriable():
                    raise
        raise AssertionError(f"init_transactions failed {RETRIES} times: {self.errors[-3:]}")

    def _run(self) -> None:
        try:
            self._transactions()
        except Exception as exc:  # noted for the test's thread, which asserts on it
            self.crashed.append(repr(exc))
        finally:
            self._producer = None  # closed here, not by the test's teardown

    def _transactions(self) -> None:
        started = time.monotonic()
        deadline = started + self.duration_s + WAIT_S
        for number in range(self.count):
            commit = number % 4 != 3
            attempt = 0
            while time.monotonic() < deadline:
                outcome = self._transaction(f"t{number}.{attempt}", commit)
                if not commit or outcome is not Outcome.ABORTED:
                    break
                attempt += 1  # aborted after an error: written again, as an application would
            next_at = started + (number + 1) * self.duration_s / self.count
            time.sleep(max(0.0, next_at - time.monotonic()))

    def _transaction(self, name: str, commit: bool) -> Outcome:
        assert self._producer is not None
        producer = self._producer
        values = {
            p: [TransactionalValue(name, p, i).encode() for i in range(RECORDS_PER_PARTITION)]
            for p in range(self.partition_count)
        }
        self.history.begin(name, values, time.monotonic())
        commit_asked = False
        try:
            try:
                producer.begin_transaction()
                for partition, records in values.items():
                    for value in records:
                        producer.produce(self.topic, value, partition=partition)
                if commit:
                    commit_asked = True
                    self._retried("commit", producer.commit_transaction)
                    outcome = Outcome.COMMITTED
                else:
                    self._retried("abort", producer.abort_transaction)
                    outcome = Outcome.ABORTED
            except KafkaException as exc:
                error = exc.args[0]
                self.errors.append(f"{name}: {error}")
                if error.fatal() or not error.txn_requires_abort():
                    raise _GaveUp from exc
                self._retried("abort", producer.abort_transaction)
                outcome = Outcome.ABORTED
        except (_GaveUp, KafkaException) as exc:
            # The commit was asked for: it may have been written. Never asked: it cannot be.
            self.errors.append(f"{name}: gave up ({exc.__cause__ or exc})")
            outcome = Outcome.UNKNOWN if commit_asked else Outcome.ABORTED
            self._producer = self._new_producer()
        self.history.end(name, outcome, time.monotonic())
        return outcome

    def _retried(self, what: str, call: object) -> None:
        assert callable(call)
        for _ in range(RETRIES):
            try:
                call(CALL_TIMEOUT_S)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if not error.retriable() or error.txn_requires_abort() or error.fatal():
                    raise
                self.errors.append(f"{what}: {error} (retried)")
        raise _GaveUp(f"{what} retried {RETRIES} times")


def markers_written(servers: str, topic: str, count: int) -> dict[int, int]:
    """Each partition's end once every transaction's markers are written (its last stable
    offset has reached its high watermark)."""
    admin = AdminClient({"bootstrap.servers": servers})
    wanted = [TopicPartition(topic, p) for p in range(count)]
    end: dict[int, int] = {}

    def ends(level: IsolationLevel) -> dict[int, int]:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = admin.list_offsets(
            {tp: latest for tp in wanted}, isolation_level=level, request_timeout=10
        )
        return {tp.partition: f.result().offset for tp, f in futures.items()}

    def stable() -> bool:
        end.update(ends(IsolationLevel.READ_UNCOMMITTED))
        return ends(IsolationLevel.READ_COMMITTED) == end

    wait_until(f"{topic}: every transaction's markers written", stable)
    return end


@attrs.define
class CommittedReader:
    """A read_committed consumer of every partition from its start, in a thread. Started
    before the faults it reads through them: a leader whose last stable offset ran ahead
    of an open transaction would hand it records that may yet be aborted, which a read
    after the faults no longer shows. `finish` lets it read on to the partitions' ends."""

    servers: str
    topic: str
    partition_count: int
    limit_s: float = WAIT_S
    read: dict[int, dict[int, bytes]] = attrs.field(factory=dict)  # partition: offset: value
    conflicts: list[str] = attrs.field(factory=list)  # an offset read again, another value
    crashed: list[str] = attrs.field(factory=list)
    _end: dict[int, int] | None = None
    _eof: dict[int, int] = attrs.field(factory=dict)  # the latest end of partition seen
    _thread: threading.Thread | None = None

    def start(self) -> None:
        # A daemon: a test failing before `finish` does not wait for its time limit.
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def finish(self, end: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
        """What it read, once it has read to `end` (from `markers_written`)."""
        assert self._thread is not None
        self._end = end
        self._thread.join(self.limit_s + 10)
        assert not self._thread.is_alive(), "the read_committed consumer did not finish"
        assert self.crashed == [] and self.conflicts == [], (self.crashed, self.conflicts)
        return {p: sorted(self.read.get(p, {}).items()) for p in range(self.partition_count)}

    def _at_end(self) -> bool:
        end = self._end
        return end is not None and all(self._eof.get(p, -1) >= o for p, o in end.items())

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.servers,
                "group.id": "fault-checker-read-committed",  # never joined
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        deadline = time.monotonic() + self.limit_s
        partitions = range(self.partition_count)
        try:
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
            while not self._at_end():
                if time.monotonic() > deadline:
                    self.crashed.append(f"not at the end {self._end} in time: {self._eof}")
                    return
                message = consumer.poll(0.2)
                if message is not None:
                    self._note(message)
        except Exception as exc:  # noted for the test's thread, which asserts on it
            self.crashed.append(repr(exc))
        finally:
            consumer.close()

    def _note(self, message: Message) -> None:
        partition, offset, error = message.partition(), message.offset(), message.error()
        if partition is None or offset is None:
            return
        if error is None:
            value = message.value() or b""
            before = self.read.setdefault(partition, {}).setdefault(offset, value)
            if before != value:
                self.conflicts.append(f"{partition}/{offset}: {before!r}, then {value!r}")
        elif error.code() == KafkaError._PARTITION_EOF:
            self._eof[partition] = max(self._eof.get(partition, -1), offset)


def read_committed_back(
    servers: str, topic: str, count: int, end: dict[int, int]
) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition read read_committed from its start to `end` (`markers_written`)."""
    reader = CommittedReader(servers, topic, count)
    reader.start()
    return reader.finish(end)
