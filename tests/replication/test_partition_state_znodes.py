"""Kafka 2.x's topic and partition-state znode documents, without a server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.partition_state_znodes import (
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
    decode_isr_change_notification,
    decode_partition_reassignment,
    encode_isr_change_notification,
    encode_partition_reassignment,
    partition_state_path,
)
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.topic_partition import TopicPartition

TP = TopicPartition("orders", 3)


def test_the_state_znode_is_kafkas_document_and_its_version_the_zk_version() -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 7, (1, 2), zk_version=4), 3)
    assert json.loads(state.encode()) == {
        "controller_epoch": 3,
        "leader": 1,
        "version": 1,
        "leader_epoch": 7,
        "isr": [1, 2],
    }
    assert LeaderIsrAndControllerEpoch.decode(TP, state.encode(), zk_version=4) == state
    assert partition_state_path(TP) == "/brokers/topics/orders/partitions/3/state"


def test_the_topic_znode_is_version_2_and_version_1_is_read() -> None:
    assignment = TopicAssignment("orders", {0: (1, 2), 1: (2, 3)}, adding_replicas={1: (3,)})
    assert json.loads(assignment.encode()) == {
        "version": 2,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"1": [3]},
        "removing_replicas": {},
    }
    assert TopicAssignment.decode("orders", assignment.encode()) == assignment
    old = b'{"version":1,"partitions":{"0":[1]}}'
    assert TopicAssignment.decode("orders", old) == TopicAssignment("orders", {0: (1,)})


def test_notifications_and_reassignments_are_kafkas_documents() -> None:
    data = encode_isr_change_notification([TP, TopicPartition("a", 0), TP])
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0}, {"topic": "orders", "partition": 3}],
    }
    assert decode_isr_change_notification("/n", data) == [TopicPartition("a", 0), TP]
    reassignment = {TP: (3, 1, 2)}
    data = encode_partition_reassignment(reassignment)
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "orders", "partition": 3, "replicas": [3, 1, 2]}],
    }
    assert decode_partition_reassignment(data) == reassignment


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"leader":1}',
        b'{"leader":"1","leader_epoch":0,"isr":[],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"isr":[true],"controller_epoch":1}',
    ],
)
def test_a_malformed_state_names_its_znode(data: bytes) -> None:
    with pytest.raises(MalformedZnode, match=r"^/brokers/topics/orders/partitions/3/state: "):
        LeaderIsrAndControllerEpoch.decode(TP, data, 0)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
documents = st.binary(max_size=80) | json_values.map(lambda v: json.dumps(v).encode())
state_like = st.fixed_dictionaries(
    {},
    optional={
        k: json_values for k in ("leader", "leader_epoch", "isr", "controller_epoch", "partitions")
    },
).map(lambda d: json.dumps(d).encode())


@given(documents | state_like)
def test_any_bytes_in_these_znodes_decode_or_are_refused_naming_the_znode(data: bytes) -> None:
    decoders: list[tuple[str, Callable[[], object], type]] = [
        (
            "/brokers/topics/orders/partitions/3/state",
            lambda: LeaderIsrAndControllerEpoch.decode(TP, data, 0),
            LeaderIsrAndControllerEpoch,
        ),
        ("/brokers/topics/t", lambda: TopicAssignment.decode("t", data), TopicAssignment),
        ("/n", lambda: decode_isr_change_notification("/n", data), list),
        ("/admin/reassign_partitions", lambda: decode_partition_reassignment(data), dict),
    ]
    for path, decode, kind in decoders:
        try:
            assert isinstance(decode(), kind)
        except MalformedZnode as exc:
            assert str(exc).startswith(f"{path}: not ")


@given(
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.lists(st.integers(0, 2**31 - 1), max_size=5),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
)
def test_every_state_round_trips(
    leader: int, epoch: int, isr: list[int], controller_epoch: int, version: int
) -> None:
    state = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, epoch, tuple(isr), version), controller_epoch
    )
    assert LeaderIsrAndControllerEpoch.decode(TP, state.encode(), version) == state
