"""Wiring of the transaction coordinator and the transaction APIs (one call from
KafkaServer)."""

from __future__ import annotations

from broker.broker_context import BrokerContext
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.handlers.add_offsets_to_txn import AddOffsetsToTxnHandler
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.describe_producers import DescribeProducersHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.end_txn import EndTxnHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.handlers.produce import ProduceHandler
from broker.handlers.txn_offset_commit import TxnOffsetCommitHandler
from broker.log import LogManager
from broker.transaction.marker_writer import GroupOffsetSink, LocalMarkerWriter
from broker.transaction.transaction_coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.transaction_log import TransactionLog
from broker.transaction.transaction_service import TransactionCoordinatorService, wall_ms


def add_transaction_coordinator(
    context: BrokerContext, log_manager: LogManager, groups: GroupCoordinatorService
) -> TransactionCoordinatorService:
    """The transaction coordinator over the log and the group coordinator (whose offsets
    transactions commit), its APIs registered; returns its service for the server."""
    config = context.config
    coordinator = TransactionCoordinator(
        TransactionConfig(
            max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        ),
        TransactionLog(context.log_dirs[0]),
        LocalMarkerWriter(log_manager),
        GroupOffsetSink(groups),
        log_manager.allocate_producer_id,
        wall_ms,
    )
    service = TransactionCoordinatorService(
        coordinator,
        abort_interval_ms=config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ),
        expiration_interval_ms=config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ),
    )
    groups.pending_transactional_offsets = coordinator.pending_offsets
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
    ):
        context.apis.add_handler(handler)
    produce = context.apis.handler(ProduceHandler.api_key)
    if isinstance(produce, ProduceHandler):
        produce.transaction_verifier = coordinator.verify_partition
    return service
