"""What this broker knows of the topics and partition states in ZooKeeper.

Brokers learn partition leadership by watching the znodes rather than from the
controller's LeaderAndIsr requests (docs/replication.md says why): the children of
`/brokers/topics`, each topic's assignment and each partition's `state` are read
with a one-shot watch; ZooKeeper's events come back through one memory channel and
each re-reads only the znode it names, so the cached image is never older than the
last event delivered. The image is a `trio_util.AsyncValue` that the topology
reads and the log follows.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import uuid
from collections.abc import Mapping

import attrs
import trio
import trio_util

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.partition_state_store import PartitionStateStore
from broker.coordination.partition_state_znodes import (
    TOPIC_CONFIG_PATH,
    TOPICS_PATH,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
    topic_config_path,
    topic_path,
)
from broker.coordination.store import (
    CoordinationStore,
    CoordinationUnavailable,
    WatchedChange,
    WatchEvent,
)
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

_READ_ALL = ""  # the event that asks for every znode to be read again
__all__ = ["TOPIC_CONFIG_PATH", "topic_config_path"]  # where the hosts' modules find them


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(topic: str, data: bytes) -> uuid.UUID:
    """The `topic_id` of a version-3 topic znode; a topic written without one (by an
    older tool) gets an id derived from its name, the same on every broker."""
    try:
        text = json.loads(data).get("topic_id")
        if isinstance(text, str):
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, AttributeError):
        pass
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-topic:{topic}")


@attrs.frozen
class TopicState:
    topic_id: uuid.UUID
    assignment: TopicAssignment
    configs: Mapping[str, str]
    # Partition -> its state; absent until the controller has written it.
    states: Mapping[int, LeaderAndIsr]
    # Partition -> the controller epoch its state was written under (what a leader's own
    # ISR writes carry), so a new leader is built from the image without reading again.
    controller_epochs: Mapping[int, int] = attrs.field(factory=dict)


HostsImage = Mapping[str, TopicState]


class PartitionStateView:
    def __init__(self, store: CoordinationStore) -> None:
        self._store = store
        self._states = PartitionStateStore(store)
        self.image: trio_util.AsyncValue[HostsImage] = trio_util.AsyncValue({})
        # Set once the image holds every topic ZooKeeper had (the first full read): only
        # then is a log on disk whose topic is missing from it known to be stray.
        self.loaded = trio.Event()
        self._events_in, self._events = trio.open_memory_channel[WatchEvent](math.inf)

    def partition(self, topic: str, partition: int) -> LeaderAndIsr | None:
        found = self.image.value.get(topic)
        return None if found is None else found.states.get(partition)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...] | None:
        found = self.image.value.get(topic)
        return None if found is None else found.assignment.partitions.get(partition)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read everything once, then one znode per watch event (in this task only)."""
        await self._read_all(full=True)
        self.loaded.set()
        task_status.started()
        async for event in self._events:
            try:
                await self._on_event(event)
            except CoordinationUnavailable as exc:
                log.warning("partition states not refreshed, ZooKeeper unavailable: %s", exc)
                await trio.sleep(1)
                self.session_renewed()

    def session_renewed(self) -> None:
        """Read everything again (the session came back, perhaps without its watches)."""
        self._events_in.send_nowait(WatchEvent(_READ_ALL, WatchedChange.CHILDREN_CHANGED))

    async def _on_event(self, event: WatchEvent) -> None:
        path = event.path
        if path in (TOPICS_PATH, _READ_ALL):
            await self._read_all(full=path == _READ_ALL)
            return
        if path.startswith(TOPIC_CONFIG_PATH + "/"):  # a topic's configs were changed
            name = path[len(TOPIC_CONFIG_PATH) + 1 :]
            known = self.image.value.get(name)
            if known is not None:
                configs = await self._read_configs(name)
                self.image.value = {**self.image.value, name: attrs.evolve(known, configs=configs)}
            return
        parts = path[len(TOPICS_PATH) + 1 :].split("/")
        image = dict(self.image.value)
        if len(parts) == 1:  # the topic's assignment
            topic = await self._read_topic(parts[0])
            if topic is None:
                image.pop(parts[0], None)
            else:
                image[parts[0]] = topic
        elif len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state":
            name, index = parts[0], int(parts[2])
            known = image.get(name)
            if known is None:
                return
            state = await self._read_state(TopicPartition(name, index))
            states, epochs = dict(known.states), dict(known.controller_epochs)
            if state is None:
                states.pop(index, None)
                epochs.pop(index, None)
            else:
                states[index], epochs[index] = state.leader_and_isr, state.controller_epoch
            image[name] = attrs.evolve(known, states=states, controller_epochs=epochs)
        self.image.value = image

    async def _read_all(self, *, full: bool) -> None:
        """The topics' names; each topic not known yet (every one when `full`) read
        with its watches. A known topic is not read again: its watches are still
        set, and a second read would leave a second watch."""
        names = await self._states.topics(watch=self._events_in)
        image = {}
        for name in names:
            known = None if full else self.image.value.get(name)
            topic = known if known is not None else await self._read_topic(name)
            if topic is not None:
                image[name] = topic
        self.image.value = image

    async def _read_topic(self, name: str) -> TopicState | None:
        node = await self._store.get(topic_path(name), watch=self._events_in)
        if node is None:
            return None
        try:
            assignment = TopicAssignment.decode(name, node.data)
        except MalformedZnode as exc:
            log.warning("ignored %s", exc)
            return None
        configs = await self._read_configs(name)
        states, epochs = {}, {}
        for index in assignment.partitions:
            state = await self._read_state(TopicPartition(name, index))
            if state is not None:
                states[index], epochs[index] = state.leader_and_isr, state.controller_epoch
        topic_id = decode_topic_id(name, node.data)
        return TopicState(topic_id, assignment, configs, states, controller_epochs=epochs)

    async def _read_configs(self, name: str) -> dict[str, str]:
        """`/config/topics/<t>`, watched: AlterConfigs on any broker reaches every one."""
        config_node = await self._store.get(topic_config_path(name), watch=self._events_in)
        if config_node is None:
            return {}
        try:
            return {str(k): str(v) for k, v in json.loads(config_node.data)["config"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("ignored %s: not Kafka's topic config", topic_config_path(name))
            return {}

    async def _read_state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        try:
            return await self._states.partition_state(tp, watch=self._events_in)
        except MalformedZnode as exc:
            log.warning("ignored %s", exc)
            return None
