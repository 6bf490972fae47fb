"""Produce's KIP-890 verification against a transaction coordinator in another process:
answers kept until the partition's marker, concurrent questions batched, Kafka's
error mapping, and a coordinator process that is down or silent answered with a
retriable error in bounded time. The peer is faked here (what it answers is the
test's subject); the coordinator side of the wire is tested against a real one."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from broker.cluster.peer_channel import PeerClient
from broker.errors import PeerUnavailable
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.produce import ProduceHandler
from broker.protocol import records as rec
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ProduceRequest, ProduceResponse
from broker.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from broker.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.security.authorizer import StandardAuthorizer
from broker.transaction.transaction_metadata import TopicPartition
from broker.transaction.txn_verification import (
    TransactionVerifier,
    VerificationGuards,
    VerifyItem,
    produce_error_for,
    response_errors,
    take_batch,
    verify_only_request,
)
from tests.cluster.peer_server import client_listener_chain, serving_peer
from tests.handlers.fake_log import FakeLog, FakeTopic
from tests.handlers.request_factory import make_request
from tests.security.acl_strategies import acl
from tests.transaction.helpers import make_coordinator

ME, COORDINATOR = 1, 2
REMOTE_TID, LOCAL_TID = "remote-tx", "local-tx"


class FakePeer:
    """The coordinator process: answers from `errors` per (tid, topic, partition) (NONE
    by default), records each request; `down` refuses, `gate` holds answers back."""

    def __init__(self) -> None:
        self.errors: dict[tuple[str, str, int], int] = {}
        self.requests: list[AddPartitionsToTxnRequest] = []
        self.down = False
        self.silent = False
        self.gate: trio.Event | None = None

    async def request(self, node: int, body: Any, version: int, *, timeout_s: float) -> Any:
        assert (node, version) == (COORDINATOR, 4)
        assert all(t.verify_only for t in body.transactions)
        self.requests.append(body)
        if self.down:
            raise PeerUnavailable("connection refused")
        if self.silent:
            with trio.move_on_after(timeout_s):
                await trio.sleep_forever()
            raise PeerUnavailable("no answer")
        if self.gate is not None:
            await self.gate.wait()
        return AddPartitionsToTxnResponse(
            results_by_transaction=tuple(
                AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id,
                    topic_results=tuple(
                        AddPartitionsToTxnTopicResult(
                            name=topic.name,
                            results_by_partition=tuple(
                                AddPartitionsToTxnPartitionResult(
                                    partition_index=p,
                                    partition_error_code=self.errors.get(
                                        (t.transactional_id, topic.name, p), ErrorCode.NONE
                                    ),
                                )
                                for p in topic.partitions
                            ),
                        )
                        for topic in t.topics
                    ),
                )
                for t in body.transactions
            )
        )


class LocalCalls:
    def __init__(self) -> None:
        self.calls: list[tuple[str | None, int, int, TopicPartition]] = []

    async def __call__(
        self, tid: str | None, producer_id: int, epoch: int, partition: TopicPartition
    ) -> int:
        self.calls.append((tid, producer_id, epoch, partition))
        return ErrorCode.INVALID_TXN_STATE


def make_verifier(
    peer: FakePeer, local: LocalCalls | None = None, timeout_s: float = 5.0
) -> TransactionVerifier:
    return TransactionVerifier(
        peer,
        my_node=ME,
        coordinator_node=lambda tid: COORDINATOR if tid == REMOTE_TID else ME,
        local=local or LocalCalls(),
        timeout_s=timeout_s,
    )


async def test_only_the_first_batch_of_a_partition_asks_the_coordinator_process() -> None:
    peer = FakePeer()
    verifier = make_verifier(peer)
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        for _ in range(3):
            assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.NONE
        assert len(peer.requests) == 1
        assert await verifier(REMOTE_TID, 7, 0, ("t", 1)) == ErrorCode.NONE
        assert len(peer.requests) == 2
        # A new epoch is another transaction: asked again.
        assert await verifier(REMOTE_TID, 7, 1, ("t", 0)) == ErrorCode.NONE
        assert len(peer.requests) == 3
        nursery.cancel_scope.cancel()


async def test_a_marker_makes_the_next_batch_of_that_partition_ask_again() -> None:
    peer = FakePeer()
    verifier = make_verifier(peer)
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.NONE
        assert await verifier(REMOTE_TID, 7, 0, ("t", 1)) == ErrorCode.NONE
        verifier.on_marker(7, "t", 0)
        peer.errors[(REMOTE_TID, "t", 0)] = ErrorCode.INVALID_TXN_STATE
        assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.INVALID_TXN_STATE
        assert await verifier(REMOTE_TID, 7, 0, ("t", 1)) == ErrorCode.NONE  # no marker yet
        assert len(peer.requests) == 3
        nursery.cancel_scope.cancel()


async def test_a_refused_batch_is_not_remembered() -> None:
    peer = FakePeer()
    peer.errors[(REMOTE_TID, "t", 0)] = ErrorCode.INVALID_TXN_STATE
    verifier = make_verifier(peer)
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.INVALID_TXN_STATE
        del peer.errors[(REMOTE_TID, "t", 0)]  # the producer added the partition
        assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.NONE
        assert len(peer.requests) == 2
        nursery.cancel_scope.cancel()


async def test_a_marker_during_the_round_trip_voids_the_verification() -> None:
    peer = FakePeer()
    peer.gate = trio.Event()
    verifier = make_verifier(peer)
    outcome: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)

        async def produce() -> None:
            outcome.append(await verifier(REMOTE_TID, 7, 0, ("t", 0)))

        nursery.start_soon(produce)
        await trio.testing.wait_all_tasks_blocked()
        verifier.on_marker(7, "t", 0)
        peer.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert outcome == [ErrorCode.INVALID_TXN_STATE]
        assert not verifier.guards.is_verified(REMOTE_TID, 7, 0, ("t", 0))
        nursery.cancel_scope.cancel()


async def test_concurrent_questions_to_one_coordinator_share_requests() -> None:
    peer = FakePeer()
    peer.gate = trio.Event()
    verifier = make_verifier(peer)
    results: dict[int, int] = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)

        async def produce(index: int) -> None:
            results[index] = await verifier(REMOTE_TID, 7, 0, ("t", index))

        nursery.start_soon(produce, 0)
        await trio.testing.wait_all_tasks_blocked()  # its request is on the wire
        for index in range(1, 10):
            nursery.start_soon(produce, index)
        await trio.testing.wait_all_tasks_blocked()
        peer.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert results == dict.fromkeys(range(10), ErrorCode.NONE)
        # The first question leaves alone; the nine asked meanwhile leave together.
        assert [
            sum(len(t.partitions) for t in r.transactions[0].topics) for r in peer.requests
        ] == [
            1,
            9,
        ]
        nursery.cancel_scope.cancel()


async def test_coordinator_errors_reach_the_producer_as_kafka_maps_them() -> None:
    peer = FakePeer()
    verifier = make_verifier(peer)
    cases = {
        ErrorCode.INVALID_TXN_STATE: ErrorCode.INVALID_TXN_STATE,
        ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING: ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    }
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        for index, (answer, expected) in enumerate(cases.items()):
            peer.errors[(REMOTE_TID, "t", index)] = answer
            assert await verifier(REMOTE_TID, 7, 0, ("t", index)) == expected
            assert produce_error_for(answer) == expected
        assert len(verifier.guards) == 0
        nursery.cancel_scope.cancel()


async def test_a_coordinator_process_that_is_down_is_a_retriable_error() -> None:
    peer = FakePeer()
    peer.down = True
    verifier = make_verifier(peer)
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.NOT_ENOUGH_REPLICAS
        peer.down = False  # back: the producer's retry is verified
        assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.NONE
        nursery.cancel_scope.cancel()


async def test_a_silent_coordinator_process_is_a_retriable_error_in_bounded_time() -> None:
    peer = FakePeer()
    peer.silent = True
    verifier = make_verifier(peer, timeout_s=0.2)
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        with trio.fail_after(2):
            assert await verifier(REMOTE_TID, 7, 0, ("t", 0)) == ErrorCode.NOT_ENOUGH_REPLICAS
        nursery.cancel_scope.cancel()


async def test_a_transaction_this_process_coordinates_is_verified_locally() -> None:
    peer = FakePeer()
    local = LocalCalls()
    verifier = make_verifier(peer, local)
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        assert await verifier(LOCAL_TID, 7, 0, ("t", 0)) == ErrorCode.INVALID_TXN_STATE
        assert await verifier(None, 8, 0, ("t", 0)) == ErrorCode.INVALID_TXN_STATE
        assert local.calls == [(LOCAL_TID, 7, 0, ("t", 0)), (None, 8, 0, ("t", 0))]
        assert peer.requests == []
        nursery.cancel_scope.cancel()


def test_a_batch_carries_one_producer_per_transactional_id() -> None:
    queue = [
        VerifyItem("a", 1, 0, ("t", 0)),
        VerifyItem("a", 2, 0, ("t", 1)),  # the id's next producer: next request
        VerifyItem("b", 3, 0, ("t", 0)),
        VerifyItem("a", 1, 0, ("u", 2)),
    ]
    first, second, third, fourth = queue
    batch = take_batch(queue)
    assert batch == [first, third, fourth]
    assert queue == [second]
    request = verify_only_request(batch)
    shape = {
        t.transactional_id: (t.producer_id, t.verify_only, {x.name: x.partitions for x in t.topics})
        for t in request.transactions
    }
    assert shape == {"a": (1, True, {"t": (0,), "u": (2,)}), "b": (3, True, {"t": (0,)})}
    # A top-level error answers every item; a missing answer is an error.
    failed = response_errors(
        AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED), batch
    )
    assert set(failed.values()) == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert set(response_errors(AddPartitionsToTxnResponse(), batch).values()) == {
        ErrorCode.UNKNOWN_SERVER_ERROR
    }


def test_guards_forget_everything_past_their_bound() -> None:
    guards = VerificationGuards(max_verified=3)
    for producer_id in range(4):
        token = guards.begin(producer_id, ("t", 0))
        assert guards.complete("tx", producer_id, 0, ("t", 0), token, verified=True)
    assert len(guards) == 1 and guards.is_verified("tx", 3, 0, ("t", 0))
    assert not guards.is_verified("another", 3, 0, ("t", 0))


# -- the coordinator's side: AddPartitionsToTxn v4 verify-only -------------------------


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="broker-verify-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


class AllPartitions:
    def partition(self, topic: str, index: int) -> object:
        return object()


async def test_the_coordinator_answers_verify_only_over_the_private_channel(
    tmp_path: Path, socket_dir: Path
) -> None:
    coordinator = make_coordinator(tmp_path)
    init = await coordinator.init_producer_id("tx", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await coordinator.add_partitions("tx", pid, epoch, [("t", 0)]) == ErrorCode.NONE
    handler = AddPartitionsToTxnHandler(
        coordinator,
        AllPartitions(),  # type: ignore[arg-type]  # v4 reads no topics
        authorizer=StandardAuthorizer([]),  # ACLs on, none for the cluster
    )
    verifier = TransactionVerifier(
        PeerClient(socket_dir, ME),
        my_node=ME,
        coordinator_node=lambda tid: COORDINATOR,
        local=LocalCalls(),
    )
    async with (
        serving_peer(socket_dir, COORDINATOR, StandardAuthorizer([]), handler),
        trio.open_nursery() as nursery,
    ):
        await nursery.start(verifier.run)
        assert await verifier("tx", pid, epoch, ("t", 0)) == ErrorCode.NONE
        assert await verifier("tx", pid, epoch, ("t", 1)) == ErrorCode.INVALID_TXN_STATE
        assert await verifier("tx", pid, epoch - 1, ("t", 0)) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert await verifier("tx", pid + 1, epoch, ("t", 0)) == (
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
        assert await verifier("nobody", pid, epoch, ("t", 0)) == (
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        )
        # verify-only added nothing
        assert coordinator.transactions["tx"].partitions == {("t", 0)}
        nursery.cancel_scope.cancel()


async def test_over_a_client_listener_verify_only_needs_cluster_action(tmp_path: Path) -> None:
    coordinator = make_coordinator(tmp_path)
    init = await coordinator.init_producer_id("tx", 60_000)
    await coordinator.add_partitions("tx", init.producer_id, init.producer_epoch, [("t", 0)])
    request = verify_only_request(
        [VerifyItem("tx", init.producer_id, init.producer_epoch, ("t", 0))]
    )

    def handler(authorizer: StandardAuthorizer) -> AddPartitionsToTxnHandler:
        return AddPartitionsToTxnHandler(
            coordinator,
            AllPartitions(),  # type: ignore[arg-type]
            authorizer=authorizer,
        )

    item = VerifyItem("tx", init.producer_id, init.producer_epoch, ("t", 0))
    denied = await client_listener_chain(handler(StandardAuthorizer([])), StandardAuthorizer([]))(
        make_request(request, 24, 4)
    )
    assert denied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allowed = StandardAuthorizer(
        [acl(CLUSTER_NAME, AclOperation.CLUSTER_ACTION, resource_type=ResourceType.CLUSTER)]
    )
    granted = await client_listener_chain(handler(allowed), allowed)(make_request(request, 24, 4))
    assert response_errors(granted, [item]) == {item: ErrorCode.NONE}


# -- Produce: the partitions of one request are asked about together ----------------------


class SlowVerifier:
    """Answers NONE after a short wait, counting the questions in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls: list[tuple[str | None, TopicPartition]] = []

    async def __call__(
        self, tid: str | None, producer_id: int, epoch: int, partition: TopicPartition
    ) -> int:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.calls.append((tid, partition))
        await trio.sleep(0.01)
        self.in_flight -= 1
        return ErrorCode.NONE


async def test_a_produce_request_asks_about_its_transactional_partitions_together() -> None:
    log = FakeLog(FakeTopic("t", 3))
    verifier = SlowVerifier()
    handler = ProduceHandler(log, transaction_verifier=verifier)
    batch = rec.encode_batch(
        [rec.Record(0, 0, None, b"v")],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    body = ProduceRequest(
        transactional_id="tx",
        acks=-1,
        topic_data=(
            TopicProduceData(
                name="t",
                partition_data=tuple(
                    PartitionProduceData(index=i, records=batch) for i in range(3)
                ),
            ),
        ),
    )
    response = await handler.handle(make_request(body, 0, 9))
    assert isinstance(response, ProduceResponse)
    assert [p.error_code for p in response.responses[0].partition_responses] == [ErrorCode.NONE] * 3
    assert verifier.most_in_flight == 3  # not one round trip after another
    assert sorted(verifier.calls) == sorted([("tx", ("t", i)) for i in range(3)] * 2)


async def test_v4_without_verify_only_adds_the_partitions(tmp_path: Path) -> None:
    coordinator = make_coordinator(tmp_path)
    init = await coordinator.init_producer_id("tx", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    item = VerifyItem("tx", pid, epoch, ("t", 4))
    verify_only = verify_only_request([item])
    adding = verify_only._replace(
        transactions=tuple(t._replace(verify_only=False) for t in verify_only.transactions)
    )
    handler = AddPartitionsToTxnHandler(coordinator, AllPartitions())  # type: ignore[arg-type]
    before = await handler.handle(make_request(verify_only, 24, 4))
    assert response_errors(before, [item]) == {item: ErrorCode.INVALID_TXN_STATE}
    added = await handler.handle(make_request(adding, 24, 4))
    assert response_errors(added, [item]) == {item: ErrorCode.NONE}
    assert coordinator.transactions["tx"].partitions == {("t", 4)}
    after = await handler.handle(make_request(verify_only, 24, 4))
    assert response_errors(after, [item]) == {item: ErrorCode.NONE}
