"""The controller as a Trio task (Kafka 2.x's KafkaController event loop).

It acts only while this broker holds `/controller` (ControllerElection's view) and
only under the epoch it was elected with: every write of partition state is
fenced by `/controller_epoch`'s version as read at activation, so a controller
deposed meanwhile writes nothing (ControllerMovedError) and stops at once.

While active, one task takes one event at a time from its inbox, as Kafka's
ControllerEventManager does, so decisions never interleave: the live brokers
changed (LiveBrokers' watch of `/brokers/ids`), a broker asks for a controlled
shutdown, `/isr_change_notification` or `/brokers/topics` changed (watches that
come back through memory channels), or the preferred-leader check is due. Each
runs a pure decision of `broker.replication.controller_decisions`, writes the
updates conditionally on each state's zkVersion, and queues LeaderAndIsr /
UpdateMetadata requests on the BrokerNotifier.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Iterable, Mapping

import attrs
import trio
import trio_util

from broker.coordination.broker_registration import BrokerRegistration, MalformedZnode
from broker.coordination.controller_admin_requests import AdminRequests
from broker.coordination.controller_election import CONTROLLER_EPOCH_PATH, ControllerView
from broker.coordination.partition_state_store import ControllerMovedError, PartitionStateStore
from broker.coordination.partition_state_znodes import (
    PREFERRED_REPLICA_ELECTION_PATH,
    UNCLEAN_LEADER_ELECTION_PATH,
    LeaderIsrAndControllerEpoch,
)
from broker.coordination.store import (
    BadVersionError,
    CoordinationStore,
    CoordinationUnavailable,
    NodeExistsError,
    WatchEvent,
)
from broker.replication.broker_notifier import (
    BrokerNotifier,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from broker.replication.controller_decisions import (
    LeaderAndIsrUpdate,
    PartitionState,
    imbalanced_partitions,
    on_broker_failure,
    on_controlled_shutdown,
    preferred_replica_election,
)
from broker.replication.leader_and_isr import NO_LEADER, LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Decide = Callable[[Iterable[PartitionState]], list[LeaderAndIsrUpdate]]


class NotControllerError(Exception):
    """This broker is not (or no longer) the active controller: the caller answers
    NOT_CONTROLLER and the asking broker finds the new one."""


class StaleBrokerEpochError(Exception):
    """A ControlledShutdown from an older registration of the broker than the live one
    (KIP-380): a process that has since been replaced asks; answered STALE_BROKER_EPOCH."""


UNKNOWN_BROKER_EPOCH = -1


def _never_unclean(_topic: str) -> bool:
    return False


@attrs.frozen
class ControllerSettings:
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_s: float = 300.0
    # Per topic (its unclean.leader.election.enable); Kafka's default is never.
    unclean_leader_election_enable: Callable[[str], bool] = _never_unclean
    # After ZooKeeper failed an activation, how long before trying again.
    retry_backoff_s: float = 1.0


@attrs.frozen
class _BrokersChanged:
    live: frozenset[int]
    # Registered again since the last event (a new registration timestamp): a broker
    # restarted faster than the controller saw it gone.
    restarted: frozenset[int] = frozenset()


@attrs.frozen
class _IsrChangeNotified:
    pass


@attrs.frozen
class _TopicsChanged:
    pass


@attrs.frozen
class _RebalanceDue:
    pass


@attrs.frozen
class _TopicDeletionRequested:
    pass


@attrs.frozen
class _ReassignmentRequested:
    pass


@attrs.frozen
class _LeaderElectionRequested:
    path: str  # PREFERRED_REPLICA_ELECTION_PATH or UNCLEAN_LEADER_ELECTION_PATH


@attrs.frozen(eq=False)
class _ControlledShutdown:
    broker_id: int
    reply: trio.MemorySendChannel[list[TopicPartition]]


_Event = (
    _BrokersChanged
    | _IsrChangeNotified
    | _TopicsChanged
    | _RebalanceDue
    | _ControlledShutdown
    | _TopicDeletionRequested
    | _LeaderElectionRequested
    | _ReassignmentRequested
)


class _Deposed(Exception):
    """`/controller_epoch` no longer holds this controller's epoch."""


class KafkaController(AdminRequests):
    def __init__(
        self,
        store: CoordinationStore,
        node_id: int,
        controller_view: trio_util.AsyncValue[ControllerView],
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
        notifier: BrokerNotifier,
        settings: ControllerSettings = ControllerSettings(),
    ) -> None:
        """`controller_view` and `live_brokers` are ClusterMembership's election view and
        live-broker view."""
        self._store = store
        self._states = PartitionStateStore(store)
        self._node_id = node_id
        self._view = controller_view
        self._live_brokers = live_brokers
        self._notifier = notifier
        self._settings = settings
        # The controller epoch while active, 0 otherwise.
        self.active_epoch: trio_util.AsyncValue[int] = trio_util.AsyncValue(0)
        self._inbox: trio.MemorySendChannel[_Event] | None = None
        # Valid while active: the fence, the cached partition states, who is live.
        self._epoch = 0
        self._epoch_zk_version = -1
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._live: frozenset[int] = frozenset()
        self._shutting_down: set[int] = set()
        # Each topic's znode is watched once (CreatePartitions changes it); a fired watch
        # takes its topic out of the set so the next read arms it again.
        self._topic_watch: trio.MemorySendChannel[WatchEvent] | None = None
        self._watched_topics: set[str] = set()
        # Reassignments followed by this controller, to their target replicas.
        self._reassigning: dict[TopicPartition, tuple[int, ...]] = {}
        self._reassignments_adopted = False

    @property
    def live(self) -> frozenset[int]:
        """The live brokers as this controller last decided over them."""
        return self._live

    @property
    def partition_states(self) -> Mapping[TopicPartition, PartitionState]:
        """The states as this controller last wrote or read them (empty when inactive)."""
        return dict(self._partitions)

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = UNKNOWN_BROKER_EPOCH
    ) -> list[TopicPartition]:
        """ControlledShutdown: move the broker's leaderships away and take it out of every
        ISR; the partitions it still leads (no other live ISR member) come back, and the
        broker asks again or goes anyway. NotControllerError when not the controller;
        StaleBrokerEpochError when `broker_epoch` (its registration's czxid, -1 unknown)
        is older than the live registration's (Kafka's doControlledShutdown)."""
        inbox = self._inbox
        if inbox is None:
            raise NotControllerError(f"broker {self._node_id} is not the controller")
        live = self._live_brokers.value.get(broker_id)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and live and broker_epoch < live.broker_epoch:
            raise StaleBrokerEpochError(
                f"controlled shutdown from an old epoch {broker_epoch} of broker"
                f" {broker_id}; its current epoch is {live.broker_epoch}"
            )
        reply_in, reply = trio.open_memory_channel[list[TopicPartition]](1)
        try:
            inbox.send_nowait(_ControlledShutdown(broker_id, reply_in))
        except trio.ClosedResourceError:
            raise NotControllerError(f"broker {self._node_id} resigned as controller") from None
        async with reply:
            try:
                return await reply.receive()
            except trio.EndOfChannel:
                raise NotControllerError(
                    f"broker {self._node_id} resigned before deciding"
                ) from None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Act whenever the election names this broker, until cancelled."""
        task_status.started()
        after_epoch = 0  # a deposed controller waits for an election newer than its own
        while True:
            epoch = (await self._view.wait_value(self._elected_after(after_epoch))).own_epoch
            # except*: raised inside the activation's nurseries, they come in groups
            # (a bare except missed them and a lost session stopped the broker).
            try:
                await self._active_while_elected(epoch)
            except* (ControllerMovedError, _Deposed) as group:
                log.warning("controller epoch %d ended: %s", epoch, _first_leaf(group))
                after_epoch = epoch
            except* CoordinationUnavailable as group:
                log.warning("controller waits for ZooKeeper: %s", _first_leaf(group))
                after_epoch = epoch - 1
                await trio.sleep(self._settings.retry_backoff_s)

    def _elected_after(self, epoch: int) -> Callable[[ControllerView], bool]:
        def elected(view: ControllerView) -> bool:
            return view.controller_id == self._node_id and view.own_epoch > epoch

        return elected

    async def _active_while_elected(self, epoch: int) -> None:
        async with trio.open_nursery() as nursery:

            async def deposed() -> None:
                await self._view.wait_value(
                    lambda v: v.controller_id != self._node_id or v.own_epoch != epoch
                )
                log.info("broker %d is no longer the controller of epoch %d", self._node_id, epoch)
                nursery.cancel_scope.cancel()

            nursery.start_soon(deposed)
            await self._act(epoch)
            nursery.cancel_scope.cancel()

    async def _act(self, epoch: int) -> None:
        epoch_node = await self._store.get(CONTROLLER_EPOCH_PATH)
        if epoch_node is None or epoch_node.data.strip() != str(epoch).encode():
            raise _Deposed(f"{CONTROLLER_EPOCH_PATH} no longer holds epoch {epoch}")
        self._epoch, self._epoch_zk_version = epoch, epoch_node.version
        self._partitions, self._shutting_down = {}, set()
        self._live = frozenset(self._live_brokers.value)
        inbox_in, inbox = trio.open_memory_channel[_Event](math.inf)
        self._inbox = inbox_in
        try:
            async with trio.open_nursery() as nursery:
                self._watched_topics, self._reassigning = set(), {}
                self._reassignments_adopted = False
                self._topic_watch = self._topic_watch_into(nursery, inbox_in)
                await self._load_topics(self._watch_into(nursery, inbox_in, _TopicsChanged()))
                # onControllerFailover: elect where leaders are gone, then tell every
                # live broker the whole state (it may have missed the last controller's).
                await self._write(self._on_failure, self._partitions.values())
                self._send_full_state(self._live)
                self.active_epoch.value = epoch
                log.info(
                    "controller of epoch %d active over %d partitions", epoch, len(self._partitions)
                )
                inbox_in.send_nowait(_IsrChangeNotified())  # reads them, arms the watch
                inbox_in.send_nowait(_TopicDeletionRequested())  # the same
                inbox_in.send_nowait(_ReassignmentRequested())
                for path in (PREFERRED_REPLICA_ELECTION_PATH, UNCLEAN_LEADER_ELECTION_PATH):
                    inbox_in.send_nowait(_LeaderElectionRequested(path))
                nursery.start_soon(self._follow_live_brokers, inbox_in)
                if self._settings.auto_leader_rebalance_enable:
                    nursery.start_soon(self._rebalance_timer, inbox_in)
                isr_watch = self._watch_into(nursery, inbox_in, _IsrChangeNotified())
                topics_watch = self._watch_into(nursery, inbox_in, _TopicsChanged())
                deletion_watch = self._watch_into(nursery, inbox_in, _TopicDeletionRequested())
                election_watches = {
                    path: self._watch_into(nursery, inbox_in, _LeaderElectionRequested(path))
                    for path in (PREFERRED_REPLICA_ELECTION_PATH, UNCLEAN_LEADER_ELECTION_PATH)
                }
                reassignment_watch = self._watch_into(nursery, inbox_in, _ReassignmentRequested())
                async for event in inbox:
                    if isinstance(event, _ReassignmentRequested):
                        await self._on_reassignment(reassignment_watch)
                    elif isinstance(event, _TopicDeletionRequested):
                        await self._on_topic_deletion(deletion_watch)
                    elif isinstance(event, _LeaderElectionRequested):
                        await self._on_leader_election(event.path, election_watches[event.path])
                    else:
                        await self._handle(event, isr_watch, topics_watch)
                    if self._reassigning:  # an ISR grew, a broker came: one may complete
                        await self._complete_reassignments()
        finally:
            self.active_epoch.value = 0
            self._inbox = None
            inbox_in.close()
            self._partitions = {}
            for event in _drain(inbox):
                if isinstance(event, _ControlledShutdown):
                    event.reply.close()  # the caller gets NotControllerError

    async def _handle(
        self,
        event: _Event,
        isr_watch: trio.MemorySendChannel[WatchEvent],
        topics_watch: trio.MemorySendChannel[WatchEvent],
    ) -> None:
        if isinstance(event, _BrokersChanged):
            await self._on_brokers_changed(event.live, event.restarted)
        elif isinstance(event, _ControlledShutdown):
            with event.reply:  # closed unanswered if deciding fails: NotControllerError
                event.reply.send_nowait(await self._on_controlled_shutdown(event.broker_id))
        elif isinstance(event, _IsrChangeNotified):
            await self._on_isr_change_notification(isr_watch)
        elif isinstance(event, _TopicsChanged):
            await self._load_topics(topics_watch)
        else:
            await self._rebalance()

    # -- events --
    async def _on_brokers_changed(
        self, live: frozenset[int], restarted: frozenset[int] = frozenset()
    ) -> None:
        if live == self._live and not restarted:
            return
        started = (live - self._live) | restarted
        log.info(
            "controller: brokers %s left, %s joined",
            sorted(self._live - live),
            sorted(started),
        )
        self._live = live
        # A broker back after its controlled shutdown may lead again (preferred leader).
        self._shutting_down = (self._shutting_down & live) - restarted
        # Offline partitions whose ISR member returned come back here too.
        await self._write(self._on_failure, self._partitions.values())
        self._send_full_state(started)  # onBrokerStartup

    def _on_failure(self, partitions: Iterable[PartitionState]) -> list[LeaderAndIsrUpdate]:
        return on_broker_failure(
            partitions, self._live, self._settings.unclean_leader_election_enable
        )

    async def _on_controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        if broker_id not in self._live:
            log.warning("controlled shutdown of broker %d, which is not live", broker_id)
        self._shutting_down.add(broker_id)

        def decide(partitions: Iterable[PartitionState]) -> list[LeaderAndIsrUpdate]:
            return on_controlled_shutdown(partitions, self._live, self._shutting_down).updates

        await self._write(decide, self._partitions.values())
        remaining = on_controlled_shutdown(
            self._partitions.values(), self._live, self._shutting_down
        ).partitions_remaining
        log.info(
            "controlled shutdown of broker %d: %d partitions remain", broker_id, len(remaining)
        )
        return remaining

    async def _on_isr_change_notification(self, watch: trio.MemorySendChannel[WatchEvent]) -> None:
        """A leader changed an ISR itself: re-read those states, tell every live broker."""
        notifications = await self._states.isr_change_notifications(watch=watch)
        if not notifications:
            return
        changed = []
        for tp in sorted({tp for tps in notifications.values() for tp in tps}):
            state = self._partitions.get(tp)
            fresh = await self._read_state(tp)
            if state is not None and fresh is not None:
                self._partitions[tp] = attrs.evolve(state, leader_and_isr=fresh)
                changed.append(self._partitions[tp])
        self._send_update_metadata(changed)
        await self._states.delete_isr_change_notifications(list(notifications))

    async def _rebalance(self) -> None:
        candidates = imbalanced_partitions(
            self._partitions.values(),
            self._live,
            self._shutting_down,
            self._settings.leader_imbalance_per_broker_percentage,
        )
        if candidates:
            log.info(
                "controller: %d partitions move back to their preferred leader", len(candidates)
            )

            def decide(partitions: Iterable[PartitionState]) -> list[LeaderAndIsrUpdate]:
                return preferred_replica_election(partitions, self._live)

            await self._write(decide, candidates)

    async def _load_topics(self, watch: trio.MemorySendChannel[WatchEvent]) -> None:
        """Read the topics not known yet; create the first state of partitions without one
        (Kafka's onNewPartitionCreation: the first live replica leads, the live replicas
        form the ISR)."""
        new_states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        new_replicas: dict[TopicPartition, tuple[int, ...]] = {}
        for topic in await self._states.topics(watch=watch):
            topic_watch = None if topic in self._watched_topics else self._topic_watch
            self._watched_topics.add(topic)
            try:
                assignment = await self._states.topic_assignment(topic, watch=topic_watch)
            except MalformedZnode as exc:
                log.error("controller ignores topic %s: %s", topic, exc)
                continue
            if assignment is None:
                continue
            for partition, replicas in sorted(assignment.partitions.items()):
                tp = TopicPartition(topic, partition)
                if tp in self._partitions:  # known; only partitions added are new
                    continue
                current = await self._read_state(tp)
                if current is not None:
                    self._partitions[tp] = PartitionState(tp, replicas, current)
                    continue
                live_replicas = tuple(b for b in replicas if b in self._live)
                leader = live_replicas[0] if live_replicas else NO_LEADER
                first = LeaderAndIsr(leader, 0, live_replicas)
                new_states[tp] = LeaderIsrAndControllerEpoch(first, self._epoch)
                new_replicas[tp] = replicas
        if not new_states:
            return
        try:
            await self._states.create_partition_states(new_states, self._epoch_zk_version)
        except NodeExistsError:
            log.warning("controller: partition states appeared meanwhile; reading them next time")
            return
        created = []
        for tp, state in new_states.items():
            self._partitions[tp] = PartitionState(tp, new_replicas[tp], state.leader_and_isr)
            created.append(self._partitions[tp])
        self._announce(created)

    # -- writing and telling --
    async def _write(self, decide: Decide, partitions: Iterable[PartitionState]) -> None:
        """Write each decided update fenced by the controller epoch. A state changed since
        it was read (a leader's ISR change) is read again and decided once more."""
        written = []
        for update in decide(list(partitions)):
            try:
                written.append(await self._write_one(update))
            except ControllerMovedError:
                raise
            except BadVersionError:
                fresh = await self._read_state(update.topic_partition)
                state = self._partitions[update.topic_partition]
                if fresh is None:
                    continue
                self._partitions[update.topic_partition] = attrs.evolve(state, leader_and_isr=fresh)
                for retry in decide([self._partitions[update.topic_partition]]):
                    try:
                        written.append(await self._write_one(retry))
                    except ControllerMovedError:
                        raise
                    except BadVersionError:
                        log.warning("controller: %s changed again; next event decides", retry)
        self._announce(written)

    async def _write_one(self, update: LeaderAndIsrUpdate) -> PartitionState:
        tp = update.topic_partition
        new = await self._states.update_leader_and_isr(
            tp, update.leader_and_isr, self._epoch, self._epoch_zk_version
        )
        if update.unclean:
            log.warning("controller: unclean election of %s: records may be lost", tp)
        log.info(
            "controller: %s leader %d epoch %d isr %s",
            tp,
            new.leader,
            new.leader_epoch,
            list(new.isr),
        )
        self._partitions[tp] = attrs.evolve(self._partitions[tp], leader_and_isr=new)
        return self._partitions[tp]

    async def _read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        try:
            state = await self._states.partition_state(tp)
        except MalformedZnode as exc:
            log.error("controller ignores %s: %s", tp, exc)
            return None
        return None if state is None else state.leader_and_isr

    def _send_full_state(self, brokers: Collection[int]) -> None:
        """onBrokerStartup: a broker (re)joining gets every state, whatever it missed."""
        states = sorted(self._partitions.values(), key=lambda s: s.topic_partition)
        self._send_leader_and_isr(states, only_to=brokers)
        self._send_update_metadata(states, only_to=brokers)

    def _announce(self, states: Iterable[PartitionState]) -> None:
        """Changed states: LeaderAndIsr to their live replicas, UpdateMetadata to all."""
        states = list(states)
        self._send_leader_and_isr(states)
        self._send_update_metadata(states)

    def _send_leader_and_isr(
        self, states: Iterable[PartitionState], only_to: Collection[int] | None = None
    ) -> None:
        by_broker: dict[int, list[PartitionState]] = {}
        for state in states:
            for broker_id in state.replicas:
                if broker_id in self._live and (only_to is None or broker_id in only_to):
                    by_broker.setdefault(broker_id, []).append(state)
        for broker_id, hosted in sorted(by_broker.items()):
            request = LeaderAndIsrRequest(self._node_id, self._epoch, tuple(hosted))
            self._notifier.send_leader_and_isr(broker_id, request)

    def _send_update_metadata(
        self, states: Iterable[PartitionState], only_to: Collection[int] | None = None
    ) -> None:
        ordered = tuple(sorted(states, key=lambda s: s.topic_partition))
        if not ordered:
            return
        live = tuple(sorted(self._live))
        request = UpdateMetadataRequest(self._node_id, self._epoch, ordered, live)
        for broker_id in live:
            if only_to is None or broker_id in only_to:
                self._notifier.send_update_metadata(broker_id, request)

    # -- sources of events --
    def _watch_into(
        self, nursery: trio.Nursery, inbox: trio.MemorySendChannel[_Event], event: _Event
    ) -> trio.MemorySendChannel[WatchEvent]:
        """A watch sink whose every event puts `event` in the inbox."""
        watch_in, watch = trio.open_memory_channel[WatchEvent](math.inf)

        async def forward() -> None:
            async for _change in watch:
                inbox.send_nowait(event)

        nursery.start_soon(forward)
        return watch_in

    def _topic_watch_into(
        self, nursery: trio.Nursery, inbox: trio.MemorySendChannel[_Event]
    ) -> trio.MemorySendChannel[WatchEvent]:
        """The sink of the topics' own znodes: a change re-reads the topics."""
        watch_in, watch = trio.open_memory_channel[WatchEvent](math.inf)

        async def forward() -> None:
            async for change in watch:
                self._watched_topics.discard(change.path.rsplit("/", 1)[-1])
                inbox.send_nowait(_TopicsChanged())

        nursery.start_soon(forward)
        return watch_in

    async def _follow_live_brokers(self, inbox: trio.MemorySendChannel[_Event]) -> None:
        known: Mapping[int, BrokerRegistration] = dict(self._live_brokers.value)
        async for brokers in self._live_brokers.eventual_values():
            inbox.send_nowait(
                _BrokersChanged(frozenset(brokers), restarted_brokers(known, brokers))
            )
            known = dict(brokers)

    async def _rebalance_timer(self, inbox: trio.MemorySendChannel[_Event]) -> None:
        while True:
            await trio.sleep(self._settings.leader_imbalance_check_interval_s)
            inbox.send_nowait(_RebalanceDue())


def restarted_brokers(
    before: Mapping[int, BrokerRegistration], after: Mapping[int, BrokerRegistration]
) -> frozenset[int]:
    """Brokers registered in both views with different registrations: each registered
    again (a restart) between the two reads, whatever the controller saw in between."""
    return frozenset(b for b, r in after.items() if b in before and before[b] != r)


def _drain(channel: trio.MemoryReceiveChannel[_Event]) -> list[_Event]:
    events = []
    while True:
        try:
            events.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return events


def _first_leaf(error: BaseException) -> BaseException:
    """The first exception of a (nested) group, for a one-line log."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
