"""Kafka 2.x's topic and partition-state znodes, encoded and decoded (ZkData's).

The documents are Kafka's own, so `kafka-topics.sh --zookeeper`, `zookeeper-shell`
and an operator's runbook read them:

- `/brokers/topics/<t>`: `{"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{}}`
- `/brokers/topics/<t>/partitions/<p>/state`:
  `{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}`
  (the znode's version is the LeaderAndIsr's zkVersion, for conditional writes)
- `/isr_change_notification/isr_change_<seq>`: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`
- `/admin/reassign_partitions`: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`
- `/admin/delete_topics/<t>`: empty; DeleteTopics asks, the controller deletes the topic's znodes
- `/admin/preferred_replica_election`: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`;
  `/admin/unclean_leader_election` (ours, as Kafka 2.4+ sends UNCLEAN to the controller
  directly): the same document; ElectLeaders asks, the controller elects and deletes it
- `/config/topics/<t>`: `{"version":1,"config":{"retention.ms":"1000"}}`, the topic's overrides

A document another tool wrote badly raises MalformedZnode naming the path, never
a KeyError from deep inside a caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from broker.coordination.broker_registration import MalformedZnode
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

TOPICS_PATH = "/brokers/topics"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_NOTIFICATION_PREFIX = f"{ISR_CHANGE_NOTIFICATION_PATH}/isr_change_"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
UNCLEAN_LEADER_ELECTION_PATH = "/admin/unclean_leader_election"
TOPIC_CONFIG_PATH = "/config/topics"
TOPIC_ZNODE_VERSION = 2
PARTITION_STATE_VERSION = 1
NOTIFICATION_VERSION = 1

T = TypeVar("T")
Assignment = Mapping[int, tuple[int, ...]]


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIG_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{partitions_path(tp.topic)}/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _ints(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list")
    return tuple(_int(v) for v in value)


def _decode(path: str, what: str, data: bytes, parse: Callable[[Any], T]) -> T:
    try:
        return parse(json.loads(data))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise MalformedZnode(f"{path}: not {what}") from exc


def _replicas_by_partition(value: object) -> dict[int, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise TypeError("partitions must be an object")
    return {int(p): _ints(replicas) for p, replicas in value.items()}


@attrs.frozen
class TopicAssignment:
    """The replicas of each partition (the first the preferred leader), and the
    replicas a reassignment is adding or removing (KIP-455)."""

    topic: str
    partitions: Assignment
    adding_replicas: Assignment = attrs.field(factory=dict)
    removing_replicas: Assignment = attrs.field(factory=dict)

    def encode(self) -> bytes:
        def as_json(assignment: Assignment) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(assignment.items())}

        return _dumps(
            {
                "version": TOPIC_ZNODE_VERSION,
                "partitions": as_json(self.partitions),
                "adding_replicas": as_json(self.adding_replicas),
                "removing_replicas": as_json(self.removing_replicas),
            }
        )

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        """Versions 1 (no adding/removing) to 3 (a topic id, not kept here) are read."""

        def parse(document: Any) -> TopicAssignment:
            return cls(
                topic,
                _replicas_by_partition(document["partitions"]),
                _replicas_by_partition(document.get("adding_replicas") or {}),
                _replicas_by_partition(document.get("removing_replicas") or {}),
            )

        return _decode(topic_path(topic), "a topic assignment", data, parse)


@attrs.frozen
class LeaderIsrAndControllerEpoch:
    """The state znode: the controller epoch names the controller that last wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader_and_isr.leader,
                "version": PARTITION_STATE_VERSION,
                "leader_epoch": self.leader_and_isr.leader_epoch,
                "isr": list(self.leader_and_isr.isr),
            }
        )

    @classmethod
    def decode(
        cls, tp: TopicPartition, data: bytes, zk_version: int
    ) -> LeaderIsrAndControllerEpoch:
        def parse(document: Any) -> LeaderIsrAndControllerEpoch:
            leader_and_isr = LeaderAndIsr(
                _int(document["leader"]),
                _int(document["leader_epoch"]),
                _ints(document["isr"]),
                zk_version,
            )
            return cls(leader_and_isr, _int(document["controller_epoch"]))

        return _decode(partition_state_path(tp), "a partition state", data, parse)


def _topic_partitions(document: Any) -> list[dict[str, Any]]:
    partitions = document["partitions"]
    if not isinstance(partitions, list):
        raise TypeError("partitions must be a list")
    return partitions


def encode_isr_change_notification(partitions: Sequence[TopicPartition]) -> bytes:
    entries = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
    return _dumps({"version": NOTIFICATION_VERSION, "partitions": entries})


def decode_isr_change_notification(path: str, data: bytes) -> list[TopicPartition]:
    def parse(document: Any) -> list[TopicPartition]:
        return [
            TopicPartition(str(e["topic"]), _int(e["partition"]))
            for e in _topic_partitions(document)
        ]

    return _decode(path, "an ISR change notification", data, parse)


def encode_partition_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    entries = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return _dumps({"version": NOTIFICATION_VERSION, "partitions": entries})


def decode_partition_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    def parse(document: Any) -> dict[TopicPartition, tuple[int, ...]]:
        return {
            TopicPartition(str(e["topic"]), _int(e["partition"])): _ints(e["replicas"])
            for e in _topic_partitions(document)
        }

    return _decode(REASSIGN_PARTITIONS_PATH, "a partition reassignment", data, parse)
