"""Wiring of the transaction coordinator and the transaction APIs (one call from
KafkaServer)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from broker.broker_context import BrokerContext
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.handlers.add_offsets_to_txn import AddOffsetsToTxnHandler
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.describe_producers import DescribeProducersHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.end_txn import EndTxnHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.handlers.produce import ProduceHandler, TransactionVerifier
from broker.handlers.txn_offset_commit import TxnOffsetCommitHandler
from broker.handlers.write_txn_markers import WriteTxnMarkersHandler
from broker.log.log_manager import LogManager
from broker.transaction.marker_writer import GroupOffsetSink, LocalMarkerWriter
from broker.transaction.transaction_coordinator import (
    MarkerWriter,
    TransactionConfig,
    TransactionCoordinator,
)
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_metadata import TopicPartition
from broker.transaction.transaction_service import TransactionCoordinatorService, wall_ms


@attrs.frozen
class TransactionPlacement:
    """Which transactional ids this process coordinates, where it journals them and how
    its markers travel. A cluster member makes its own (broker/cluster/member.py)."""

    journal_dir: Path
    markers: MarkerWriter
    owns: Callable[[str], bool]
    owns_group_shard: Callable[[int], bool]
    single_process: bool


def single_process_placement(context: BrokerContext, local: MarkerWriter) -> TransactionPlacement:
    return TransactionPlacement(
        journal_dir=context.log_dirs[0],
        markers=local,
        owns=lambda transactional_id: True,
        owns_group_shard=lambda shard: shard == 0,
        single_process=True,
    )


def add_transaction_coordinator(
    context: BrokerContext,
    log_manager: LogManager,
    groups: GroupCoordinatorService,
    local_markers: LocalMarkerWriter,
    placement: TransactionPlacement | None = None,
) -> TransactionCoordinatorService:
    """The transaction coordinator over the log and the group coordinator (whose offsets
    transactions commit), its APIs registered; returns its service for the server."""
    config = context.config
    if placement is None:
        placement = single_process_placement(context, local_markers)
    coordinator = TransactionCoordinator(
        TransactionConfig(
            max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        ),
        TransactionLog(placement.journal_dir),
        placement.markers,
        GroupOffsetSink(groups),
        log_manager.allocate_producer_id,
        wall_ms,
    )
    coordinator.owns = placement.owns
    # KIP-890 verification: a producer this coordinator does not know has no open
    # transaction here. In a cluster, Produce asks the coordinator process of the
    # producer's transactional id (broker/cluster/txn_verification.py).
    coordinator.verify_unknown_producers = True
    service = TransactionCoordinatorService(
        coordinator,
        abort_interval_ms=config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ),
        expiration_interval_ms=config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ),
        # Other processes may be starting too: their markers must not hold up ours.
        complete_before_serving=placement.single_process,
    )
    auth = context.authorizer
    for handler in (
        InitProducerIdHandler(log_manager, coordinator, authorizer=auth),
        AddPartitionsToTxnHandler(coordinator, log_manager, authorizer=auth),
        AddOffsetsToTxnHandler(coordinator, authorizer=auth),
        EndTxnHandler(coordinator, authorizer=auth),
        TxnOffsetCommitHandler(coordinator, groups, log_manager, authorizer=auth),
        DescribeTransactionsHandler(coordinator, authorizer=auth),
        ListTransactionsHandler(coordinator, authorizer=auth),
        DescribeProducersHandler(log_manager, authorizer=auth),
        WriteTxnMarkersHandler(local_markers, placement.owns_group_shard, authorizer=auth),
    ):
        context.apis.add_handler(handler)
    produce = context.apis.handler(ProduceHandler.api_key)
    if isinstance(produce, ProduceHandler):
        produce.transaction_verifier = local_verifier(coordinator)
    return service


def local_verifier(coordinator: TransactionCoordinator) -> TransactionVerifier:
    """Produce's verification against this process's coordinator (by producer id)."""

    async def verify(
        transactional_id: str | None, producer_id: int, epoch: int, partition: TopicPartition
    ) -> int:
        return coordinator.verify_partition(producer_id, epoch, partition)

    return verify
