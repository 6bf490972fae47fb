"""ZooKeeper lost while the hosts run (issue 20, "Bad input and faults"): stopped for
longer than the session timeout under idempotent acks=all load, on three hosts
(`host_processes.py`), replication factor 3 and min.insync.replicas=2.

While it is down the leaders keep serving what they lead: Fetch and acks=1 produces are
answered, and acks=all too while every replica keeps fetching. Then a follower's host is
killed with -9: its leaders would have to shrink the ISR, which only ZooKeeper can
record, so acks=all on the partitions it followed is refused (NOT_ENOUGH_REPLICAS once
the shrink is found waiting for ZooKeeper; NOT_ENOUGH_REPLICAS_AFTER_APPEND for one
already waiting, which the idempotent producers retry) and never acknowledged without
the follower. ZooKeeper returns on the same data, the ISRs shrink, the dead host's
partition gets a leader, acks resume; the host returns on its log dir and rejoins every
ISR; the checker finds every acknowledged record once, in order.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from broker.coordination.partition_leader import ISR_WRITE_PATIENCE_S
from tests.hosts.acknowledged_records import anomalies
from tests.hosts.acknowledged_since import partitions_acknowledged_since
from tests.hosts.host_processes import (
    Hosts,
    ProducerLoad,
    create_topic,
    host_metadata,
    host_partitions,
    hosts_cluster,
    read_back,
    replica_sizes,
    wait_for_full_isr,
    wait_until,
)
from tests.zookeeper_fixture import ZooKeeperServer, start_zookeeper, stop_zookeeper

SESSION_TIMEOUT_S = 3.0
LAG_S = 2.0
PARTITIONS = 3
SETTINGS = {
    "zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
    "replica.lag.time.max.ms": str(int(LAG_S * 1000)),
    "replica.fetch.backoff.ms": "200",
    "min.insync.replicas": "2",
    "controlled.shutdown.retry.backoff.ms": "200",
}
PROBE = b"probe"  # the test's own records, beside the load's
# What a refused acks=all produce may answer: refused before the append (what the
# runs show), or, appended just before the shrink was found waiting, after it; the
# produce's own timeout only if the broker's ISR check did not come round in time.
REFUSED = {
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.REQUEST_TIMED_OUT,
}


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[list[ZooKeeperServer]]:
    """This test's own server, stopped and started again by the test (the list holds
    the running one)."""
    (tmp_path / "zookeeper").mkdir()
    servers = [start_zookeeper(tmp_path / "zookeeper")]
    try:
        yield servers
    finally:
        stop_zookeeper(servers[-1])


@pytest.fixture
def hosts(tmp_path: Path, zookeeper: list[ZooKeeperServer]) -> Iterator[Hosts]:
    yield from hosts_cluster(tmp_path, f"{zookeeper[0].hosts}/zookeeper-loss", SETTINGS)


def produce_once(servers: str, topic: str, partition: int, acks: str) -> KafkaError | None:
    """One record with `acks`, no retries, a 2 s produce timeout: the broker's own answer
    (None when acknowledged)."""
    producer = Producer(
        {
            "bootstrap.servers": servers,
            "acks": acks,
            "retries": 0,
            "request.timeout.ms": 2000,
            "message.timeout.ms": 5000,
        }
    )
    answers: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        answers.append(error)

    producer.produce(topic, PROBE, partition=partition, on_delivery=delivered)
    producer.flush(10)
    assert len(answers) == 1, f"no answer to an acks={acks} produce on {partition}"
    return answers[0]


def fetches(servers: str, topic: str, partition: int) -> bool:
    """A consumer's Fetch of the partition from its start is answered with records."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "zookeeper-loss-reader",  # never joined: partitions are assigned
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return True
        return False
    finally:
        consumer.close()


def test_zookeeper_lost_past_the_session_timeout_refuses_acks_all_it_cannot_keep(
    hosts: Hosts, zookeeper: list[ZooKeeperServer]
) -> None:
    topic = f"zookeeper-loss-{uuid.uuid4().hex[:8]}"
    create_topic(hosts.bootstrap, topic, PARTITIONS)
    wait_for_full_isr(hosts, topic, PARTITIONS)
    views = host_partitions(hosts.hosts[1], topic)
    controller = host_metadata(hosts.hosts[1], topic).controller_id
    victim = next(i for i in sorted(hosts.hosts, reverse=True) if i != controller)
    followed = {p for p, view in views.items() if view.leader != victim}
    load = ProducerLoad(hosts.bootstrap, topic, PARTITIONS, count=120, duration_s=17.0)
    load.start()
    time.sleep(1.0)

    stopped_at = time.monotonic()
    stop_zookeeper(zookeeper[0])
    try:
        # Every replica fetching: acks=all needs no ISR change, nor does acks=1.
        for partition in range(PARTITIONS):
            assert produce_once(hosts.bootstrap, topic, partition, "1") is None
        time.sleep(max(0.0, stopped_at + SESSION_TIMEOUT_S + 0.5 - time.monotonic()))
        killed_at = time.monotonic()
        hosts.hosts[victim].kill()
        # Its leaders find it lagging (checked every LAG_S / 2) and cannot record the
        # shrink: once the write has waited ISR_WRITE_PATIENCE_S, acks=all is refused.
        time.sleep(LAG_S * 1.5 + ISR_WRITE_PATIENCE_S + 1.0)
        for partition in sorted(followed):
            refused = produce_once(hosts.bootstrap, topic, partition, "all")
            assert refused is not None and refused.code() in REFUSED, (partition, refused)
            print(f"acks=all on partition {partition}: {refused.name()}")
            assert produce_once(hosts.bootstrap, topic, partition, "1") is None
            assert fetches(hosts.bootstrap, topic, partition)
        print(
            f"ZooKeeper down {time.monotonic() - stopped_at:.2f} s"
            f" (session timeout {SESSION_TIMEOUT_S} s); host {victim} killed after"
            f" {killed_at - stopped_at:.2f} s; acks=all on {sorted(followed)} refused"
        )
    finally:
        back_at = time.monotonic()
        zookeeper[0] = start_zookeeper(zookeeper[0].data_dir, zookeeper[0].host, zookeeper[0].port)
    acked_while_down = [
        a for h in load.histories for a in list(h.acknowledged.values()) if stopped_at < a.at
    ]
    assert any(a.at < killed_at for a in acked_while_down), "no acks=all before the kill"
    without_victim = [
        value
        for h in load.histories
        for value, a in list(h.acknowledged.items())
        if h.sent_at[value] > killed_at and a.at < back_at
    ]
    assert without_victim == [], "acknowledged without the killed follower"

    resumed_s = wait_until(
        "acks=all resume on every partition",
        lambda: len(partitions_acknowledged_since(load, back_at)) == PARTITIONS,
    )
    print(f"ZooKeeper back: acks=all on every partition after {resumed_s:.2f} s")
    hosts.hosts[victim].start()
    wait_for_full_isr(hosts, topic, PARTITIONS)
    history = load.join()
    assert load.fatal == []
    wait_until(
        "every replica holds its leader's bytes",
        lambda: len({tuple(replica_sizes(h, topic).items()) for h in hosts.hosts.values()}) == 1,
    )
    read = read_back(hosts.bootstrap, topic, PARTITIONS)
    loads = {p: [r for r in records if r[1] != PROBE] for p, records in read.items()}
    assert anomalies(history, loads) == []
