"""Issue 20's faults, each under load, on three hosts run as `broker serve` processes
(127.0.0.2-4, one rack each) coordinated through a real ZooKeeper: a topic with
replication factor 3 and min.insync.replicas=2, two idempotent confluent-kafka
producers with acks=all, and afterwards the checker (`acknowledged_records.py`) over
every partition read back: every acknowledged record there once, at its offset, in
producing order, nothing that was never sent. Beside them a transactional producer
(`transactional_load.py`) writes transactions over a second topic's partitions, its
coordinator moved onto the host the fault hits; read back read_committed, every
committed transaction is whole and nothing of an aborted one is there
(`committed_transactions.py`).

The session timeout is short (5 s) so that failovers fit in the test's time; the
failover times are printed (`pytest -s`) and quoted in docs/replication.md.

The network cut runs the hosts in network namespaces of their own (`network_namespaces.py`,
root needed, as CI runs), with ZooKeeper and the clients in the test's namespace, and has
a consumer group consume through it (`consumed_records.py` checks it resumed from its
committed offsets).
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import attrs
import pytest
from confluent_kafka.admin import AdminClient

from broker.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from tests.hosts.acknowledged_records import ProducedHistory, ReadBack, anomalies
from tests.hosts.committed_transactions import Outcome, TransactionHistory, transaction_anomalies
from tests.hosts.consumed_records import covers, resumption_anomalies
from tests.hosts.group_consumers import GroupConsumers
from tests.hosts.host_processes import (
    ADDRESSES,
    WAIT_S,
    Hosts,
    PartitionView,
    ProducerLoad,
    ask_host,
    create_topic,
    host_metadata,
    host_partitions,
    hosts_cluster,
    partitions,
    read_back,
    replica_sizes,
    wait_for_full_isr,
    wait_until,
)
from tests.hosts.moved_leaders import move_transaction_coordinator
from tests.hosts.network_namespaces import BRIDGE_ADDRESS, HostNetworks, host_networks
from tests.hosts.transactional_load import (
    CommittedReader,
    TransactionalLoad,
    markers_written,
    read_committed_back,
)
from tests.zookeeper_fixture import (
    ZooKeeperServer,
    restart_zookeeper,
    start_zookeeper,
    stop_zookeeper,
)

SESSION_TIMEOUT_S = 5.0
PARTITIONS = 3
SETTINGS = {
    "zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "min.insync.replicas": "2",
    # The last host stopped has no in-sync replica to hand over to: no waits in teardown.
    "controlled.shutdown.retry.backoff.ms": "200",
    # Transactions past their timeout are aborted within a second (Kafka: every 10 s).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@attrs.define
class RestartableZooKeeper:
    server: ZooKeeperServer

    def restart(self, down_s: float) -> None:
        self.server = restart_zookeeper(self.server, down_s)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableZooKeeper]:
    """This module's own server: one test restarts it."""
    zookeeper = RestartableZooKeeper(start_zookeeper(tmp_path_factory.mktemp("zookeeper")))
    try:
        yield zookeeper
    finally:
        stop_zookeeper(zookeeper.server)


@pytest.fixture
def hosts(tmp_path: Path, zookeeper: RestartableZooKeeper) -> Iterator[Hosts]:
    connect = f"{zookeeper.server.hosts}/faults-{uuid.uuid4().hex[:12]}"
    yield from hosts_cluster(tmp_path, connect, SETTINGS)


@attrs.frozen
class LoadOutcome:
    history: ProducedHistory
    read: ReadBack
    transactions: TransactionHistory


def under_load(
    hosts: Hosts,
    fault: Callable[[str, ProducerLoad], None],
    count: int = 100,
    duration_s: float = 6.0,
    transaction_coordinator: Callable[[str], int] | None = None,
) -> LoadOutcome:
    """A replicated topic, producers sending `count` values each over a few seconds with
    `fault` done meanwhile, and beside them a transactional producer writing transactions
    over every partition of a second topic; then the cluster fully recovered and both logs
    checked: every replica the same bytes as its leader's, every acknowledged record there
    once, every committed transaction whole and nothing of the aborted ones read_committed.
    `transaction_coordinator` names the host (given the topic) that the transaction
    coordinator is moved to before the load: the one the fault hits."""
    topic = f"faults-{uuid.uuid4().hex[:8]}"
    transactional = f"{topic}-txn"
    for created in (topic, transactional):
        create_topic(hosts.bootstrap, created, PARTITIONS)
    for created in (topic, transactional):
        wait_for_full_isr(hosts, created, PARTITIONS)
    transactions = TransactionalLoad(
        hosts.bootstrap,
        transactional,
        PARTITIONS,
        count=max(8, int(duration_s * 1.5)),
        duration_s=duration_s,
        transactional_id=transactional,
    )
    live = CommittedReader(hosts.bootstrap, transactional, PARTITIONS, duration_s + 4 * WAIT_S)
    live.start()
    transactions.initialize()
    if transaction_coordinator is not None:
        coordinator = transaction_coordinator(topic)
        move_transaction_coordinator(hosts, coordinator)
        print(f"transaction coordinator: host {coordinator}")
    transactions.start()
    load = ProducerLoad(hosts.bootstrap, topic, PARTITIONS, count, duration_s)
    load.start()
    time.sleep(1.0)
    fault_began = time.monotonic()
    fault(topic, load)
    history = load.join()
    written = transactions.join()
    assert transactions.crashed == [], transactions.errors
    for created in (topic, transactional):
        wait_for_full_isr(hosts, created, PARTITIONS)
    assert load.fatal == []
    for created in (topic, transactional):
        wait_until(
            f"every replica of {created} holds its leader's bytes",
            partial(replicas_agree, hosts, created),
        )
    read = read_back(hosts.bootstrap, topic, PARTITIONS)
    assert anomalies(history, read) == []
    assert len(history.acknowledged) > len(history.sent) / 2, history.failed
    end = markers_written(hosts.bootstrap, transactional, PARTITIONS)
    committed = read_committed_back(hosts.bootstrap, transactional, PARTITIONS, end)
    print(f"transactions: {written.summary()}; errors met: {transactions.errors[:8]}")
    assert transaction_anomalies(written, committed) == [], transactions.errors
    # What a consumer was given while the fault happened breaks no promise either.
    assert transaction_anomalies(written, live.finish(end)) == [], transactions.errors
    assert any(t.ended_at > fault_began for t in written.with_outcome(Outcome.COMMITTED)), (
        f"no transaction committed after the fault began: {transactions.errors}"
    )
    if transaction_coordinator is not None:
        # Its coordinator moved (a leader epoch of `__transaction_state` past its first):
        # the markers carry that epoch, which fences a replaced coordinator's late ones.
        epochs = marker_coordinator_epochs(hosts, transactional)
        print(f"the last markers' coordinator epochs: {epochs}")
        assert min(epochs.values()) > 0, epochs
    return LoadOutcome(history, read, written)


def marker_coordinator_epochs(hosts: Hosts, topic: str) -> dict[int, int]:
    """The coordinator epoch of each partition's last marker, as its leader's
    DescribeProducers reports it (one transactional producer writes there)."""
    running = next(h for h in hosts.hosts.values() if h.process is not None)
    found: dict[int, int] = {}
    for partition, view in host_partitions(running, topic).items():
        request = DescribeProducersRequest(
            topics=(TopicRequest(name=topic, partition_indexes=(partition,)),)
        )
        answer = ask_host(hosts.hosts[view.leader], request, 0)
        (described,) = answer.topics[0].partitions
        found[partition] = max(p.coordinator_epoch for p in described.active_producers)
    return found


def replicas_agree(hosts: Hosts, topic: str) -> bool:
    sizes = [replica_sizes(host, topic) for host in hosts.hosts.values()]
    return len(sizes[0]) == PARTITIONS and all(s == sizes[0] for s in sizes)


def led_by(views: Mapping[int, PartitionView], node_id: int) -> set[int]:
    return {p for p, view in views.items() if view.leader == node_id}


def acknowledged_again(
    load: ProducerLoad, led: set[int], since: float, hosts: Hosts | None = None
) -> float:
    """Seconds from `since` until a record of the `led` partitions sent after it is
    acknowledged (on failure, the topic as every running host sees it)."""

    def acked() -> float | None:
        times = [h.first_acknowledged_after(led, since) for h in load.histories]
        return min((t for t in times if t is not None), default=None)

    try:
        wait_until(f"acks on partitions {sorted(led)} resume", lambda: acked() is not None)
    except AssertionError as exc:
        if hosts is None:
            raise
        views = {i: host_partitions(h, load.topic) for i, h in hosts.hosts.items() if h.process}
        failed = {v: e for h in load.histories for v, e in list(h.failed.items())[:3]}
        raise AssertionError(
            f"{exc}; Metadata per host: {views}; fatal: {load.fatal}; failed: {failed}"
        ) from None
    resumed = acked()
    assert resumed is not None
    return resumed - since


@attrs.frozen
class Isolation:
    led: set[int]  # the partitions the host led
    started_at: float
    ended_at: float


def isolated_past_its_session(
    hosts: Hosts,
    topic: str,
    victim: int,
    fault: str,
    isolate: Callable[[], None],
    restore: Callable[[], None],
    meanwhile: Callable[[], None] = lambda: None,
) -> Isolation:
    """The victim's host isolated until the others lead its partitions and its session
    has expired, then restored: it must learn it lost them (its own Metadata naming other
    leaders at higher epochs) and keep running."""
    host = hosts.hosts[victim]
    other = next(h for i, h in hosts.hosts.items() if i != victim)
    before = host_partitions(host, topic)
    led = led_by(before, victim)
    assert led, f"host {victim} leads no partition: {before}"
    started_at = time.monotonic()
    isolate()
    try:
        meanwhile()
        wait_until(
            f"other leaders for partitions {sorted(led)}",
            lambda: not led_by(host_partitions(other, topic), victim),
        )
        print(
            f"{fault} of host {victim}: leaders moved after {time.monotonic() - started_at:.2f} s"
        )
        time.sleep(max(0.0, started_at + SESSION_TIMEOUT_S + 1 - time.monotonic()))
    finally:
        restore()
    ended_at = time.monotonic()

    def fenced() -> bool:
        now = host_partitions(host, topic)
        return all(
            now[p].leader != victim and now[p].leader_epoch > before[p].leader_epoch for p in led
        )

    wait_until(f"host {victim} back after the {fault} knows it no longer leads", fenced)
    print(f"{fault} of host {victim} over: fenced after {time.monotonic() - ended_at:.2f} s")
    assert host.process is not None and host.process.process.poll() is None
    return Isolation(led, started_at, ended_at)


def test_a_host_killed_and_brought_back_loses_no_acknowledged_record(hosts: Hosts) -> None:
    def kill_a_leader_and_restart_it(topic: str, load: ProducerLoad) -> None:
        views = partitions(hosts.bootstrap, topic)
        victim = views[0].leader
        killed_at = time.monotonic()
        hosts.hosts[victim].kill()
        failover_s = acknowledged_again(load, led_by(views, victim), killed_at, hosts)
        print(f"kill -9 of host {victim}: acks resumed after {failover_s:.2f} s")
        assert failover_s < SESSION_TIMEOUT_S + 15
        hosts.hosts[victim].start()

    under_load(
        hosts,
        kill_a_leader_and_restart_it,
        transaction_coordinator=lambda topic: partitions(hosts.bootstrap, topic)[0].leader,
    )


def test_a_leader_paused_past_its_session_is_fenced_when_it_resumes(hosts: Hosts) -> None:
    """The controller's host is the one paused (each host leads a partition): the other
    hosts elect a controller and leaders, and the resumed host gives up both."""

    def pause_the_controllers_host(topic: str, load: ProducerLoad) -> None:
        victim = host_metadata(hosts.hosts[1], topic).controller_id
        paused = hosts.hosts[victim]
        isolated_past_its_session(
            hosts,
            topic,
            victim,
            "SIGSTOP",
            lambda: paused.signal(signal.SIGSTOP),
            lambda: paused.signal(signal.SIGCONT),
        )

    under_load(
        hosts,
        pause_the_controllers_host,
        transaction_coordinator=lambda topic: host_metadata(hosts.hosts[1], topic).controller_id,
    )


def test_zookeeper_restarted_under_load_leaves_the_hosts_serving(
    hosts: Hosts, zookeeper: RestartableZooKeeper
) -> None:
    window: list[float] = []

    def restart_zookeeper_meanwhile(topic: str, load: ProducerLoad) -> None:
        window.append(time.monotonic())
        zookeeper.restart(down_s=2.0)
        window.append(time.monotonic())
        print(f"ZooKeeper down for {window[1] - window[0]:.2f} s")
        acknowledged_again(load, set(range(PARTITIONS)), window[-1], hosts)

    history = under_load(hosts, restart_zookeeper_meanwhile, count=150, duration_s=12.0).history
    stopped, restarted = window
    during = [a for a in history.acknowledged.values() if stopped < a.at < restarted]
    after = [a for a in history.acknowledged.values() if a.at > restarted]
    assert during, "no acknowledgement while ZooKeeper was down"
    assert after, "no acknowledgement after ZooKeeper came back"


def test_a_rolling_restart_of_every_host_loses_no_acknowledged_record(hosts: Hosts) -> None:
    def restart_each_host(topic: str, load: ProducerLoad) -> None:
        for node_id, host in hosts.hosts.items():
            views = partitions(hosts.bootstrap, topic)
            stopped_at = time.monotonic()
            assert host.stop() == 0
            led = led_by(views, node_id)
            if led:
                stall_s = acknowledged_again(load, led, stopped_at, hosts)
                print(f"rolling restart, host {node_id}: acks resumed after {stall_s:.2f} s")
            host.start()
            wait_for_full_isr(hosts, topic, PARTITIONS)

    under_load(hosts, restart_each_host, count=200, duration_s=30.0)


@pytest.fixture
def cut_off_hosts(tmp_path: Path) -> Iterator[tuple[Hosts, HostNetworks]]:
    """The three hosts each in a network namespace of its own, on one bridge with the
    test's namespace, where this test's ZooKeeper and clients run (the test's thread
    stays there until the hosts and ZooKeeper are stopped)."""
    octets = {node_id: str(10 + node_id) for node_id in ADDRESSES}
    with host_networks(octets) as networks, networks.test.entered():
        (tmp_path / "zookeeper").mkdir()
        server = start_zookeeper(tmp_path / "zookeeper", host=BRIDGE_ADDRESS)
        try:
            settings = {
                **SETTINGS,
                "group.initial.rebalance.delay.ms": "0",
            }
            with contextmanager(hosts_cluster)(
                tmp_path, f"{server.hosts}/cut-off", settings, networks
            ) as hosts:
                yield hosts, networks
        finally:
            stop_zookeeper(server)


def group_coordinator(servers: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": servers})
    described = admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
    return int(described.coordinator.id)


def test_a_host_cut_off_the_network_is_fenced_then_rejoins_and_the_group_resumes(
    cut_off_hosts: tuple[Hosts, HostNetworks],
) -> None:
    """The host cut off is the group's coordinator (it leads a partition of the topic
    too), cut from ZooKeeper, the other hosts and every client past its session timeout:
    the others elect leaders and a coordinator; the cut-off leader cannot shrink its ISR
    without ZooKeeper, so nothing it takes meanwhile is acknowledged; healed, it learns
    it lost leadership, truncates and rejoins every ISR. A second consumer joins the
    group during the cut: the group rebalances through the new coordinator, and every
    member resumes from the committed offsets."""
    hosts, networks = cut_off_hosts
    group = f"cut-off-{uuid.uuid4().hex[:8]}"
    started: list[GroupConsumers] = []
    cuts: list[Isolation] = []

    def cut_off_the_coordinators_host(topic: str, load: ProducerLoad) -> None:
        consumers = GroupConsumers(hosts.bootstrap, topic, group)
        started.append(consumers)
        consumers.add("c0")
        every = set(range(PARTITIONS))
        wait_until("c0 holds every partition", lambda: consumers.holding("c0") == every)
        victim = group_coordinator(hosts.bootstrap, group)
        cut = isolated_past_its_session(
            hosts,
            topic,
            victim,
            "network cut",
            lambda: networks.cut_off(victim),
            lambda: networks.heal(victim),
            meanwhile=lambda: consumers.add("c1"),  # joins while the coordinator is cut off
        )
        cuts.append(cut)
        resumed_s = acknowledged_again(load, cut.led, cut.started_at, hosts)
        print(f"host {victim} cut off: acks on its partitions resumed after {resumed_s:.2f} s")

    try:
        # The group's coordinator (the leader of `__consumer_offsets`-0, created by this
        # first look-up) coordinates the transactions too.
        wait_until("a group coordinator", lambda: group_coordinator(hosts.bootstrap, group) > 0)
        outcome = under_load(
            hosts,
            cut_off_the_coordinators_host,
            count=120,
            duration_s=12.0,
            transaction_coordinator=lambda _: group_coordinator(hosts.bootstrap, group),
        )
        (consumers,) = started
        wait_until(
            "the group was given every record", lambda: covers(consumers.history, outcome.read)
        )
    finally:
        for group_consumers in started:
            group_consumers.stop()
    assert resumption_anomalies(consumers.history, outcome.read) == []
    (cut,) = cuts
    assert consumers.history.assigned_after(cut.started_at) == {"c0", "c1"}, "no rebalance"
    joined = min(consumers.history.assigned_times("c1"))
    print(
        f"c1 given partitions {joined - cut.started_at:.2f} s after the cut "
        f"(healed after {cut.ended_at - cut.started_at:.2f} s)"
    )
