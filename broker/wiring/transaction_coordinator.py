"""Wiring of the transaction coordinator and the transaction APIs (one call from
KafkaServer)."""

from __future__ import annotations

from pathlib import Path

import attrs

from broker.broker_context import BrokerContext
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_metadata_partition import GroupMetadataPartition
from broker.handlers.add_offsets_to_txn import AddOffsetsToTxnHandler
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.describe_producers import DescribeProducersHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.end_txn import EndTxnHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.handlers.txn_offset_commit import TxnOffsetCommitHandler
from broker.handlers.write_txn_markers import WriteTxnMarkersHandler
from broker.log.log_manager import LogManager
from broker.topology import Topology, TransactionVerifier
from broker.transaction.marker_writer import GroupOffsetSink, LocalMarkerWriter
from broker.transaction.replicated_transaction_log import ReplicatedTransactionLog
from broker.transaction.transaction_coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_metadata import TopicPartition
from broker.transaction.transaction_service import TransactionCoordinatorService, wall_ms


@attrs.frozen
class Transactions:
    """The transaction coordinator as the rest of the broker sees it."""

    service: TransactionCoordinatorService
    verifier: TransactionVerifier
    """Produce's KIP-890 verification (the topology's, around this coordinator)."""


def add_transaction_coordinator(
    context: BrokerContext,
    topology: Topology,
    log_manager: LogManager,
    groups: GroupCoordinatorService,
    local_markers: LocalMarkerWriter,
    *,
    journal_dir: Path,
    complete_before_serving: bool,
    partition: GroupMetadataPartition | None = None,
) -> Transactions:
    """The transaction coordinator over the log and the group coordinator (whose offsets
    transactions commit), its APIs registered; the topology places the transactional
    ids and routes the markers. `complete_before_serving`: finish prepared transactions
    before the network starts (not when other processes may be starting too).
    `partition`: the replicated `__transaction_state` partition the state is kept in
    instead of a journal in `journal_dir` (hosts coordinated through ZooKeeper)."""
    config = context.config
    coordinator = TransactionCoordinator(
        TransactionConfig(
            max_timeout_ms=config.transactions.max_timeout_ms,
            id_expiration_ms=config.transactions.id_expiration_ms,
        ),
        TransactionLog(journal_dir) if partition is None else ReplicatedTransactionLog(partition),
        topology.route_markers(local_markers),
        GroupOffsetSink(groups),
        log_manager.allocate_producer_id,
        wall_ms,
        owns=topology.owns_transaction,
    )
    service = TransactionCoordinatorService(
        coordinator,
        abort_interval_ms=config.transactions.abort_timed_out_transaction_cleanup_interval_ms,
        expiration_interval_ms=config.transactions.remove_expired_transaction_cleanup_interval_ms,
        complete_before_serving=complete_before_serving,
    )
    auth = context.authorizer
    for handler in (
        InitProducerIdHandler(log_manager, coordinator, authorizer=auth),
        AddOffsetsToTxnHandler(coordinator, authorizer=auth),
        EndTxnHandler(coordinator, authorizer=auth),
        TxnOffsetCommitHandler(coordinator, groups, log_manager, authorizer=auth),
        DescribeTransactionsHandler(coordinator, authorizer=auth),
        ListTransactionsHandler(coordinator, authorizer=auth),
        DescribeProducersHandler(log_manager, authorizer=auth),
    ):
        context.apis.add_handler(handler)
    # Also served on a cluster's internal listener (other processes' markers and
    # verify-only AddPartitionsToTxn; broker/cluster/peer_channel.py).
    context.apis.add_handler(WriteTxnMarkersHandler(local_markers, topology.owns_group_shard))
    context.apis.add_handler(AddPartitionsToTxnHandler(coordinator, log_manager, authorizer=auth))
    return Transactions(service, topology.transaction_verifier(local_verifier(coordinator)))


def local_verifier(coordinator: TransactionCoordinator) -> TransactionVerifier:
    """Produce's verification against this process's coordinator (by producer id)."""

    async def verify(
        transactional_id: str | None, producer_id: int, epoch: int, partition: TopicPartition
    ) -> int:
        return coordinator.verify_partition(producer_id, epoch, partition)

    return verify
