"""A faust-streaming application (tests/streams/apps/faust_counter.py: a Table counting
words, kept in memory) stopped and started again across a crash of the broker: the second
worker restores the counts from the table's changelog topic (created by faust with
cleanup.policy=compact) and carries on with the words sent once it is ready.

Words sent while no worker runs are not part of the check: faust (0.11) can skip one of
them. Its fetcher, resumed while the table is restored, delivers the waiting records into
the stream and notes each as read; when the restore ends it suspends the flow (the stream's
queue cleared) and seeks back to the committed offset, and its fetcher then drops every
refetched record below the last one it noted ("DROPPED MESSAGE" in
faust/transport/consumer.py), so a record cleared from the queue is never processed while
its offset is committed past (seen once in CI-like runs: `(1, 60)` never processed).

What faust promises at least once, and what is asserted: every input record is processed
(none skipped: a Fetch losing records would fail here), and the table holds exactly the
updates of the records processed, across the restart (nothing lost from or added to the
changelog). It does not promise each record once: a record may be delivered again, and
the count of its word is then one over. That happened to the last waiting record of a
partition in 5 runs of 10 while words waited for a restoring worker (the same refetch as
the skip above: the record equal to the last one noted passes faust's `offset >= last read
offset` filter). The application prints each record it counts, so the test
compares the counts with the records processed rather than with the records produced.

At least once, stopped with SIGTERM (faust commits on the way out), because faust's own
exactly-once mode is not exact across a stop: it sends table changelog records through a
buffer that it does not flush before a transaction commits, so the last updates go into
the next transaction, which only a later commit of new input offsets closes; a worker
stopped before that leaves them to be aborted (seen here: offsets committed for 20 words,
their 20th changelog update aborted). aiokafka's transactional offset commit, which faust's
exactly-once mode uses, is tested in tests/interop/test_transactions.py."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker_harness import BrokerProcess, stop_broker_process
from tests.interop.kafka_clients import create_topic, rdkafka_settings
from tests.streams.stream_harness import (
    free_port,
    latest_by_key,
    read_committed,
    start_app,
    start_broker,
    wait_for,
)

WORDS = [b"w%d" % i for i in range(7)]
CHANGELOG = "wordcount-counts-changelog"


def produce_words(bootstrap: str, rounds: int) -> None:
    producer = Producer(rdkafka_settings(bootstrap, acks="all"))
    for _ in range(rounds):
        for word in WORDS:
            producer.produce("words", key=word, value=b"")
    assert producer.flush(30) == 0


def all_consumed(bootstrap: str) -> bool:
    """The application's group has committed the end of every input partition."""
    group = Consumer(rdkafka_settings(bootstrap, group_id="wordcount"))
    try:
        partitions = [TopicPartition("words", p) for p in range(2)]
        committed = group.committed(partitions, timeout=10)
        ends = [group.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
    finally:
        group.close()
    return [tp.offset for tp in committed] == ends


def input_ends(bootstrap: str) -> list[int]:
    consumer = Consumer(rdkafka_settings(bootstrap, group_id="wordcount-ends"))
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition("words", p), timeout=10)[1]
            for p in range(2)
        ]
    finally:
        consumer.close()


def processed(log: Path) -> list[tuple[int, int, str]]:
    """(partition, offset, word) of each record the application counted, in order."""
    found = re.findall(r"PROCESSED (\d+) (\d+) (\S+)", log.read_text(errors="replace"))
    return [(int(partition), int(offset), word) for partition, offset, word in found]


def assert_at_least_once(bootstrap: str, log: Path, table: dict[str, int]) -> None:
    """Every input record processed, and each word's count the number of times its
    records were processed (so at least the number produced)."""
    records = processed(log)
    seen = {(partition, offset) for partition, offset, _ in records}
    ends = input_ends(bootstrap)
    skipped = [(p, o) for p in range(2) for o in range(ends[p]) if (p, o) not in seen]
    assert skipped == [], f"input records never processed: {skipped}"
    per_word: dict[str, int] = {}
    for _, _, word in records:
        per_word[word] = per_word.get(word, 0) + 1
    assert table == per_word


def counts(bootstrap: str) -> dict[str, int]:
    latest = latest_by_key(read_committed(bootstrap, CHANGELOG))
    return {json.loads(key): json.loads(value) for key, value in latest.items()}


def ready_workers(log: Path) -> int:
    return log.read_text(errors="replace").count("[^Worker]: Ready")


def start_worker(bootstrap: str, tmp_path: Path, log: Path) -> subprocess.Popen[str]:
    """A worker, once it has joined and restored its table."""
    before = ready_workers(log) if log.exists() else 0
    worker = start_app("faust_counter.py", [bootstrap, str(tmp_path / "faust")], log)
    wait_until_running(worker, log, lambda: ready_workers(log) > before, "the worker is ready")
    return worker


def wait_until_running(
    worker: subprocess.Popen[str], log: Path, condition: Callable[[], bool], what: str
) -> None:
    try:
        wait_for(lambda: worker.poll() is not None or condition(), 60, what)
        assert worker.poll() is None, f"the worker exited with {worker.returncode}"
    except AssertionError as failed:
        worker.kill()
        worker.wait(10)
        raise AssertionError(f"{failed}\n{log.read_text()[-5000:]}") from None


def stop(worker: subprocess.Popen[str]) -> None:
    """SIGTERM: faust flushes its changelog and commits its offsets on the way out."""
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_faust_table_counts_are_restored_from_the_changelog_across_restarts(tmp_path: Path) -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    data = tmp_path / "data"
    log = tmp_path / "faust.log"
    broker: BrokerProcess = start_broker(data, port)
    worker: subprocess.Popen[str] | None = None
    try:
        create_topic(bootstrap, "words", 2)
        worker = start_worker(bootstrap, tmp_path, log)
        produce_words(bootstrap, 20)
        wait_until_running(worker, log, lambda: all_consumed(bootstrap), "every word consumed")
        first = counts(bootstrap)
        assert_at_least_once(bootstrap, log, first)
        stop(worker)
        stop_broker_process(broker, signal.SIGKILL)
        broker = start_broker(data, port)
        # In memory only: the second worker's counts come from the changelog.
        worker = start_worker(bootstrap, tmp_path, log)
        produce_words(bootstrap, 10)
        wait_until_running(worker, log, lambda: all_consumed(bootstrap), "every word consumed")
        second = counts(bootstrap)
        assert_at_least_once(bootstrap, log, second)
        stop(worker)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(10)
        stop_broker_process(broker)
    assert set(first) == set(second) == {word.decode() for word in WORDS}
