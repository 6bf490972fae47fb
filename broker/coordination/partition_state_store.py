"""Reading and writing topics and partition states through the coordination seam.

Who writes what, as in Kafka 2.x: the controller creates partition states and
changes leaders, each write fenced by the controller epoch (a transaction that
checks `/controller_epoch`'s version, so a controller deposed meanwhile writes
nothing); a leader changes only its partition's ISR, conditional on the state's
zkVersion (so it loses to a controller that moved leadership meanwhile), and
then announces the change under `/isr_change_notification` for the controller
to pass on. Every conditional write returns the LeaderAndIsr with its new
zkVersion, which the next write must name.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence

from broker.coordination.controller_election import CONTROLLER_EPOCH_PATH
from broker.coordination.partition_state_znodes import (
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_NOTIFICATION_PREFIX,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
    decode_isr_change_notification,
    decode_partition_reassignment,
    delete_topic_path,
    encode_isr_change_notification,
    encode_partition_reassignment,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)
from broker.coordination.store import (
    BadVersionError,
    CheckOp,
    CoordinationStore,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    WatchSink,
)
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

Reassignment = Mapping[TopicPartition, Sequence[int]]


class ControllerMovedError(BadVersionError):
    """`/controller_epoch` changed: another broker is controller now (Kafka's
    ControllerMovedException); this one must resign rather than retry."""


class PartitionStateStore:
    def __init__(self, store: CoordinationStore) -> None:
        self._store = store

    # -- topics --
    async def create_topic(self, assignment: TopicAssignment) -> None:
        """NodeExistsError if the topic exists (CreateTopics answers TOPIC_ALREADY_EXISTS)."""
        await self._store.ensure_path(TOPICS_PATH)
        await self._store.create(topic_path(assignment.topic), assignment.encode())

    async def topics(self, *, watch: WatchSink | None = None) -> list[str]:
        await self._store.ensure_path(TOPICS_PATH)
        return await self._store.children(TOPICS_PATH, watch=watch)

    async def topic_assignment(
        self, topic: str, *, watch: WatchSink | None = None
    ) -> TopicAssignment | None:
        node = await self._store.get(topic_path(topic), watch=watch)
        return None if node is None else TopicAssignment.decode(topic, node.data)

    # -- topic deletion (Kafka 2.x's TopicDeletionManager, without StopReplica) --
    async def request_topic_deletion(self, topic: str) -> None:
        """DeleteTopics' part: mark the topic; asking twice is asking once."""
        await self._store.ensure_path(DELETE_TOPICS_PATH)
        with contextlib.suppress(NodeExistsError):
            await self._store.create(delete_topic_path(topic))

    async def topics_to_delete(self, *, watch: WatchSink | None = None) -> list[str]:
        await self._store.ensure_path(DELETE_TOPICS_PATH)
        return await self._store.children(DELETE_TOPICS_PATH, watch=watch)

    async def delete_topic(self, topic: str) -> None:
        """The controller's part: every znode of the topic, leaves first, its config, and
        last the request (so a controller stopped half-way finds it again)."""
        with contextlib.suppress(NoNodeError):
            for partition in await self._store.children(partitions_path(topic)):
                tp = TopicPartition(topic, int(partition))
                for path in (partition_state_path(tp), partition_path(tp)):
                    with contextlib.suppress(NoNodeError):
                        await self._store.delete(path)
        for path in (
            partitions_path(topic),
            topic_path(topic),
            topic_config_path(topic),
            delete_topic_path(topic),
        ):
            with contextlib.suppress(NoNodeError):
                await self._store.delete(path)

    # -- leader elections asked for (ElectLeaders) --
    async def request_leader_election(
        self, path: str, partitions: Sequence[TopicPartition]
    ) -> None:
        """NodeExistsError while an earlier request is pending (the caller waits)."""
        await self._store.ensure_path("/admin")
        await self._store.create(path, encode_isr_change_notification(partitions))

    async def leader_election_request(
        self, path: str, *, watch: WatchSink | None = None
    ) -> list[TopicPartition]:
        """The partitions asked for (none without a request); the watch sees it created."""
        node = await self._store.get(path, watch=watch)
        return [] if node is None else decode_isr_change_notification(path, node.data)

    async def delete_leader_election_request(self, path: str) -> None:
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path)

    # -- partition states --
    async def partition_state(
        self, tp: TopicPartition, *, watch: WatchSink | None = None
    ) -> LeaderIsrAndControllerEpoch | None:
        node = await self._store.get(partition_state_path(tp), watch=watch)
        if node is None:
            return None
        return LeaderIsrAndControllerEpoch.decode(tp, node.data, node.version)

    async def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """The controller's first states of new partitions, all or none."""
        for tp in states:
            await self._store.ensure_path(partition_path(tp))
        ops = [
            CreateOp(partition_state_path(tp), state.encode())
            for tp, state in sorted(states.items())
        ]
        await self._fenced_commit(ops, expected_controller_epoch_zk_version)

    async def update_leader_and_isr(
        self,
        tp: TopicPartition,
        leader_and_isr: LeaderAndIsr,
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> LeaderAndIsr:
        """The controller's write (an election, an ISR shrink); `leader_and_isr.zk_version`
        is the version read. BadVersionError if the state changed since,
        ControllerMovedError if this controller was deposed."""
        state = LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)
        op = SetOp(partition_state_path(tp), state.encode(), leader_and_isr.zk_version)
        await self._fenced_commit([op], expected_controller_epoch_zk_version)
        return _next_version(leader_and_isr)

    async def update_isr_as_leader(
        self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int
    ) -> LeaderAndIsr:
        """The leader's own ISR change (Partition.shrinkIsr/expandIsr in Kafka 2.x), keeping
        the controller epoch it read; BadVersionError if the controller wrote first."""
        state = LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)
        await self._store.set(
            partition_state_path(tp), state.encode(), version=leader_and_isr.zk_version
        )
        return _next_version(leader_and_isr)

    # -- ISR change notifications --
    async def propagate_isr_changes(self, partitions: Sequence[TopicPartition]) -> str:
        await self._store.ensure_path(ISR_CHANGE_NOTIFICATION_PATH)
        return await self._store.create_sequential(
            ISR_CHANGE_NOTIFICATION_PREFIX, encode_isr_change_notification(partitions)
        )

    async def isr_change_notifications(
        self, *, watch: WatchSink | None = None
    ) -> dict[str, list[TopicPartition]]:
        """Sequence node name -> partitions, oldest first; the controller deletes them
        (`delete_isr_change_notifications`) once it has sent the new metadata."""
        await self._store.ensure_path(ISR_CHANGE_NOTIFICATION_PATH)
        notifications = {}
        for name in await self._store.children(ISR_CHANGE_NOTIFICATION_PATH, watch=watch):
            path = f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}"
            node = await self._store.get(path)
            if node is not None:
                notifications[name] = decode_isr_change_notification(path, node.data)
        return notifications

    async def delete_isr_change_notifications(self, names: Sequence[str]) -> None:
        for name in names:
            with contextlib.suppress(NoNodeError):
                await self._store.delete(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}")

    # -- reassignments --
    async def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]]
    ) -> None:
        """NodeExistsError while another reassignment is in progress (Kafka refuses it too)."""
        await self._store.ensure_path("/admin")
        await self._store.create(
            REASSIGN_PARTITIONS_PATH, encode_partition_reassignment(reassignment)
        )

    async def partition_reassignment(
        self, *, watch: WatchSink | None = None
    ) -> dict[TopicPartition, tuple[int, ...]]:
        node = await self._store.get(REASSIGN_PARTITIONS_PATH, watch=watch)
        return {} if node is None else decode_partition_reassignment(node.data)

    async def update_partition_reassignment(
        self, change: Callable[[dict[TopicPartition, tuple[int, ...]]], Reassignment]
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """Apply `change` to what remains to be reassigned and write the result at the
        version read (created where missing, deleted when nothing remains), reading again
        whenever another writer came first: AlterPartitionReassignments on any broker and
        the controller merge into the one znode (KIP-455), and a plain read-modify-write
        would lose one of two concurrent requests. `change` may run more than once."""
        await self._store.ensure_path("/admin")
        while True:
            node = await self._store.get(REASSIGN_PARTITIONS_PATH)
            current = {} if node is None else decode_partition_reassignment(node.data)
            wanted = {tp: tuple(replicas) for tp, replicas in change(dict(current)).items()}
            if wanted == current:
                return wanted
            try:
                if node is None:
                    if wanted:
                        await self._store.create(
                            REASSIGN_PARTITIONS_PATH, encode_partition_reassignment(wanted)
                        )
                elif not wanted:
                    await self._store.delete(REASSIGN_PARTITIONS_PATH, version=node.version)
                else:
                    await self._store.set(
                        REASSIGN_PARTITIONS_PATH,
                        encode_partition_reassignment(wanted),
                        version=node.version,
                    )
                return wanted
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue

    async def update_topic_assignment(
        self,
        topic: str,
        replicas: Mapping[int, Sequence[int]],
        adding: Mapping[int, Sequence[int]],
        removing: Mapping[int, Sequence[int]],
    ) -> None:
        """Change some partitions' replicas (and their `adding_replicas` /
        `removing_replicas`, dropped where empty) in the topic znode, keeping every other
        field (the topic id above all) as written; read again if another writer
        (CreatePartitions) changed it meanwhile. NoNodeError if the topic is gone."""
        while True:
            node = await self._store.get(topic_path(topic))
            if node is None:
                raise NoNodeError(topic_path(topic))
            document = json.loads(node.data)
            document["version"] = max(int(document.get("version", 1)), 2)
            for key, changes in (("adding_replicas", adding), ("removing_replicas", removing)):
                current = dict(document.get(key) or {})
                for partition in replicas:
                    current.pop(str(partition), None)
                current.update({str(p): list(r) for p, r in changes.items() if r})
                document[key] = current
            document["partitions"].update({str(p): list(r) for p, r in replicas.items()})
            try:
                await self._store.set(
                    topic_path(topic), json.dumps(document).encode(), version=node.version
                )
                return
            except BadVersionError:
                continue

    async def delete_partition_reassignment(self) -> None:
        with contextlib.suppress(NoNodeError):
            await self._store.delete(REASSIGN_PARTITIONS_PATH)

    async def _fenced_commit(
        self, ops: Sequence[CreateOp | SetOp], expected_controller_epoch_zk_version: int
    ) -> None:
        check = CheckOp(CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
        try:
            await self._store.commit([check, *ops])
        except BadVersionError:
            epoch = await self._store.get(CONTROLLER_EPOCH_PATH)
            if epoch is None or epoch.version != expected_controller_epoch_zk_version:
                raise ControllerMovedError(
                    f"{CONTROLLER_EPOCH_PATH} is no longer at version"
                    f" {expected_controller_epoch_zk_version}: another controller was elected"
                ) from None
            raise


def _next_version(leader_and_isr: LeaderAndIsr) -> LeaderAndIsr:
    """A conditional set succeeded: ZooKeeper added one to the version it named."""
    return LeaderAndIsr(
        leader_and_isr.leader,
        leader_and_isr.leader_epoch,
        leader_and_isr.isr,
        leader_and_isr.zk_version + 1,
    )
