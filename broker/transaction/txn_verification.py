"""KIP-890 part 1 across processes: before a transactional batch is appended, the
partition's leader asks the producer's transaction coordinator whether the
producer's open transaction holds the partition (Kafka 3.6+'s
AddPartitionsToTxnManager, and the verification guard of its producer state).

Where this process coordinates the transaction the answer is local. Otherwise the
question is an AddPartitionsToTxn v4 verify-only request over the private channel
(broker/cluster/peer_channel.py). Only the first batch of each partition of each
transaction pays that round trip: a positive answer is kept per (producer id,
partition) with its epoch until the partition's next marker, which ends the
transaction there, so a batch after the marker is verified again. A marker that
arrives while a verification is on the wire voids it (Kafka's guard mismatch):
the batch is refused rather than appended after the transaction's end.

Questions for one coordinator process wait while one request to it is on the wire
and then leave together, one request for all (one transaction entry per
transactional id). Errors reach the producer as Kafka's ReplicaManager maps
them; a coordinator process that is down or slow is a retriable error after a
bounded wait, never a hang.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import attrs
import trio

from broker.errors import PeerUnavailable
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from broker.protocol.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from broker.transaction.transaction_metadata import TopicPartition

log = logging.getLogger(__name__)

VERIFY_VERSION = 4
VERIFY_TIMEOUT_S = 5.0
"""Below the producers' request.timeout.ms (30 s by default): the producer hears a
retriable error and tries again rather than timing out itself."""
MAX_VERIFIED = 100_000
"""Kept answers beyond this are dropped all at once: forgetting one only costs a
round trip, and a producer that vanished without a marker leaves its entries."""

RETRIABLE_VERIFY_ERRORS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)

LocalVerifier = Callable[[str | None, int, int, TopicPartition], Awaitable[int]]


def produce_error_for(error: int) -> int:
    """The error a producer sees for a verification's answer (Kafka's
    AddPartitionsToTxnManager and ReplicaManager): a fenced producer hears
    INVALID_PRODUCER_EPOCH; errors that are retriable for the coordinator, which
    older producers may not retry on Produce, become NOT_ENOUGH_REPLICAS (retriable,
    and no metadata refresh)."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error in RETRIABLE_VERIFY_ERRORS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return error


class VerificationGuards:
    """The positive answers kept, and the verifications on the wire that a marker voids."""

    def __init__(self, max_verified: int = MAX_VERIFIED) -> None:
        self._max_verified = max_verified
        # -> (transactional id, producer epoch) of the transaction verified
        self._verified: dict[tuple[int, TopicPartition], tuple[str, int]] = {}
        self._pending: dict[tuple[int, TopicPartition], set[object]] = {}

    def __len__(self) -> int:
        return len(self._verified)

    def is_verified(
        self, transactional_id: str, producer_id: int, epoch: int, partition: TopicPartition
    ) -> bool:
        return self._verified.get((producer_id, partition)) == (transactional_id, epoch)

    def begin(self, producer_id: int, partition: TopicPartition) -> object:
        token = object()
        self._pending.setdefault((producer_id, partition), set()).add(token)
        return token

    def complete(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partition: TopicPartition,
        token: object,
        *,
        verified: bool,
    ) -> bool:
        """False when a marker came while the verification was on the wire."""
        key = (producer_id, partition)
        pending = self._pending.get(key)
        if pending is None or token not in pending:
            return False
        pending.discard(token)
        if not pending:
            del self._pending[key]
        if verified:
            if len(self._verified) >= self._max_verified:
                self._verified.clear()
            self._verified[key] = (transactional_id, epoch)
        return True

    def invalidate(self, producer_id: int, partition: TopicPartition) -> None:
        self._verified.pop((producer_id, partition), None)
        self._pending.pop((producer_id, partition), None)


@attrs.frozen
class VerifyItem:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition: TopicPartition


def take_batch(queue: list[VerifyItem]) -> list[VerifyItem]:
    """Removes and returns what one request can carry: the response names each
    transaction by its id only, so an id with a second (producer id, epoch) waits."""
    batch: list[VerifyItem] = []
    producers: dict[str, tuple[int, int]] = {}
    rest: list[VerifyItem] = []
    for item in queue:
        producer = (item.producer_id, item.producer_epoch)
        if producers.setdefault(item.transactional_id, producer) == producer:
            batch.append(item)
        else:
            rest.append(item)
    queue[:] = rest
    return batch


def verify_only_request(items: Iterable[VerifyItem]) -> AddPartitionsToTxnRequest:
    transactions: dict[str, tuple[int, int, dict[str, list[int]]]] = {}
    for item in items:
        _, _, topics = transactions.setdefault(
            item.transactional_id, (item.producer_id, item.producer_epoch, {})
        )
        topic, index = item.partition
        if index not in topics.setdefault(topic, []):
            topics[topic].append(index)
    return AddPartitionsToTxnRequest(
        transactions=tuple(
            AddPartitionsToTxnTransaction(
                transactional_id=tid,
                producer_id=producer_id,
                producer_epoch=epoch,
                verify_only=True,
                topics=tuple(
                    AddPartitionsToTxnTopic(name=name, partitions=tuple(indexes))
                    for name, indexes in topics.items()
                ),
            )
            for tid, (producer_id, epoch, topics) in transactions.items()
        )
    )


def response_errors(
    response: AddPartitionsToTxnResponse, items: Iterable[VerifyItem]
) -> dict[VerifyItem, int]:
    """The coordinator's answer per item; an item it did not answer is an error."""
    wanted = list(items)
    if response.error_code != ErrorCode.NONE:
        return dict.fromkeys(wanted, response.error_code)
    answers: dict[tuple[str, str, int], int] = {}
    for txn in response.results_by_transaction:
        for topic in txn.topic_results:
            for p in topic.results_by_partition:
                answers[(txn.transactional_id, topic.name, p.partition_index)] = (
                    p.partition_error_code
                )
    return {
        item: answers.get((item.transactional_id, *item.partition), ErrorCode.UNKNOWN_SERVER_ERROR)
        for item in wanted
    }


class PeerRequester(Protocol):
    async def request(self, node: int, body: Any, version: int, *, timeout_s: float) -> Any:
        """PeerUnavailable when the process cannot be reached or does not answer."""
        ...


@attrs.define
class _Waiter:
    item: VerifyItem
    done: trio.Event = attrs.field(factory=trio.Event)
    error: int = ErrorCode.NETWORK_EXCEPTION


class TransactionVerifier:
    """Produce's transaction verifier in a cluster (a broker `Service`: its senders
    run in its nursery)."""

    def __init__(
        self,
        peers: PeerRequester,
        *,
        my_node: int,
        coordinator_node: Callable[[str], int],
        local: LocalVerifier,
        timeout_s: float = VERIFY_TIMEOUT_S,
        guards: VerificationGuards | None = None,
    ) -> None:
        self._peers = peers
        self._my_node = my_node
        self._coordinator_node = coordinator_node
        self._local = local
        self.timeout_s = timeout_s
        self.guards = guards if guards is not None else VerificationGuards()
        self.requests_sent = 0
        self._queues: dict[int, list[_Waiter]] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def on_marker(self, producer_id: int, topic: str, index: int) -> None:
        """A marker for the partition: the producer's transaction there has ended."""
        self.guards.invalidate(producer_id, (topic, index))

    async def __call__(
        self,
        transactional_id: str | None,
        producer_id: int,
        epoch: int,
        partition: TopicPartition,
    ) -> int:
        if transactional_id is None:
            return await self._local(transactional_id, producer_id, epoch, partition)
        node = self._coordinator_node(transactional_id)
        if node == self._my_node:
            return await self._local(transactional_id, producer_id, epoch, partition)
        if self.guards.is_verified(transactional_id, producer_id, epoch, partition):
            return ErrorCode.NONE
        token = self.guards.begin(producer_id, partition)
        error = await self._ask(node, VerifyItem(transactional_id, producer_id, epoch, partition))
        current = self.guards.complete(
            transactional_id, producer_id, epoch, partition, token, verified=error == ErrorCode.NONE
        )
        if error == ErrorCode.NONE and not current:
            return ErrorCode.INVALID_TXN_STATE  # the transaction ended meanwhile
        return produce_error_for(error)

    async def _ask(self, node: int, item: VerifyItem) -> int:
        nursery = self._nursery
        if nursery is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # starting or stopping
        waiter = _Waiter(item)
        queue = self._queues.get(node)
        if queue is None:
            queue = self._queues[node] = []
            queue.append(waiter)
            nursery.start_soon(self._send_all, node, queue)
        else:
            queue.append(waiter)
        with trio.move_on_after(self.timeout_s + 1.0):
            await waiter.done.wait()
        return waiter.error

    async def _send_all(self, node: int, queue: list[_Waiter]) -> None:
        """Sends what is queued for the node, one request at a time, until nothing is."""
        try:
            while queue:
                batch = take_batch(list(dict.fromkeys(w.item for w in queue)))
                sent = [w for w in queue if w.item in batch]
                queue[:] = [w for w in queue if w.item not in batch]
                errors = await self._send(node, batch)
                for waiter in sent:
                    waiter.error = errors.get(waiter.item, ErrorCode.UNKNOWN_SERVER_ERROR)
                    waiter.done.set()
        finally:
            del self._queues[node]
            for waiter in queue:  # cancelled: no answer is coming
                waiter.done.set()

    async def _send(self, node: int, batch: list[VerifyItem]) -> dict[VerifyItem, int]:
        self.requests_sent += 1
        try:
            response = await self._peers.request(
                node, verify_only_request(batch), VERIFY_VERSION, timeout_s=self.timeout_s
            )
        except PeerUnavailable as exc:
            log.info("transaction verification: node %d unavailable (%s)", node, exc)
            return dict.fromkeys(batch, ErrorCode.NETWORK_EXCEPTION)
        except Exception:
            log.exception("transaction verification: node %d answered badly", node)
            return dict.fromkeys(batch, ErrorCode.UNKNOWN_SERVER_ERROR)
        if not isinstance(response, AddPartitionsToTxnResponse):
            return dict.fromkeys(batch, ErrorCode.UNKNOWN_SERVER_ERROR)
        return response_errors(response, batch)
