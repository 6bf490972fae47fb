"""An exactly-once consume-transform-produce application on confluent-kafka, with state:
a running sum per key, kept in a changelog topic written in the same transaction as the
output and the consumed offsets (Kafka Streams' design, by hand).

Run: python eos_counter.py BOOTSTRAP INPUT OUTPUT CHANGELOG GROUP TRANSACTIONAL_ID
It works until SIGTERM (exit 0); a fatal client error exits 3 for its supervisor (the
test) to start it again. Each committed transaction prints `committed <records>`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

BATCH = 10
PAUSE_S = 0.02
"""Between transactions, so a test can kill the application in the middle of the stream."""


def settings(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 500,
        "retry.backoff.ms": 50,
        # With librdkafka 2.16's re-bootstrap (all brokers down: the single broker
        # restarting) we saw send_offsets_to_transaction wait past its own timeout, no
        # request sent for the group's coordinator: keep the known brokers instead.
        "metadata.recovery.strategy": "none",
        **({"debug": os.environ["EOS_COUNTER_DEBUG"]} if "EOS_COUNTER_DEBUG" in os.environ else {}),
        **extra,
    }


def restore(bootstrap: str, changelog: str) -> dict[bytes, int]:
    """The state as the last committed transaction left it: the latest sum per key."""
    reader = Consumer(
        settings(
            bootstrap,
            **{
                "group.id": "eos-counter-restore",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            },
        )
    )
    partitions = reader.list_topics(changelog, timeout=30).topics[changelog].partitions
    reader.assign([TopicPartition(changelog, p, OFFSET_BEGINNING) for p in partitions])
    state: dict[bytes, int] = {}
    at_end: set[int] = set()
    while len(at_end) < len(partitions):
        for msg in reader.consume(500, 0.5):
            error = msg.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                at_end.add(msg.partition() or 0)
                continue
            at_end.discard(msg.partition() or 0)
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None
            state[key] = int(value)
    reader.close()
    return state


def rewind(consumer: Consumer) -> None:
    """Back to the committed offsets after an aborted transaction."""
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, OFFSET_BEGINNING)))


def process(
    producer: Producer,
    consumer: Consumer,
    state: dict[bytes, int],
    batch: list[Message],
    output: str,
    changelog: str,
) -> None:
    producer.begin_transaction()
    for msg in batch:
        key, value = msg.key(), msg.value()
        assert key is not None and value is not None
        state[key] = state.get(key, 0) + int(value)
        total = str(state[key]).encode()
        partition = msg.partition() or 0
        producer.produce(output, key=key, value=total, partition=partition)
        producer.produce(changelog, key=key, value=total, partition=partition)
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)


def main() -> int:
    bootstrap, source, output, changelog, group, transactional_id = sys.argv[1:7]
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    producer = Producer(
        settings(bootstrap, **{"transactional.id": transactional_id, "linger.ms": 2})
    )
    producer.init_transactions(60)
    # Restored after init_transactions: that fences an earlier instance and ends its
    # open transaction, so the changelog read here is final.
    state = restore(bootstrap, changelog)
    consumer = Consumer(
        settings(
            bootstrap,
            **{
                "group.id": group,
                # The restarted instance takes the killed one's place at once (KIP-345).
                "group.instance.id": transactional_id,
                "session.timeout.ms": 6000,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            },
        )
    )
    consumer.subscribe([source])
    committed = 0
    try:
        while not stopping:
            batch = [m for m in consumer.consume(BATCH, 0.2) if m.error() is None]
            if not batch:
                continue
            before = dict(state)
            try:
                process(producer, consumer, state, batch, output, changelog)
            except KafkaException as exc:
                error = exc.args[0]
                if not error.txn_requires_abort():
                    print(f"fatal: {error}", flush=True)
                    return 3
                print(f"aborting: {error}", flush=True)
                producer.abort_transaction(30)
                state = before
                rewind(consumer)
                continue
            committed += len(batch)
            print(f"committed {committed}", flush=True)
            time.sleep(PAUSE_S)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
