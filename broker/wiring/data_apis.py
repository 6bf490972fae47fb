"""Wiring of the log and the data and admin APIs into the broker.

One call from KafkaServer._add_subsystems, with the log its deployment made (a
LogManager, or a cluster process's) and the topology: every data and admin handler
here is registered, over that log. The server starts the log as a service before the network, so it has
recovered every partition before the first request.
"""

from __future__ import annotations

import functools

from broker.broker_context import BrokerContext
from broker.broker_topic_stats import BrokerTopicStats
from broker.handlers.alter_configs import (
    AlterConfigsHandler,
    ConfigAlterer,
    IncrementalAlterConfigsHandler,
)
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.current_leaders import CurrentLeaders
from broker.handlers.delete_records import DeleteRecordsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_cluster import DescribeClusterHandler
from broker.handlers.describe_configs import DescribeConfigsHandler
from broker.handlers.describe_log_dirs import DescribeLogDirsHandler
from broker.handlers.elect_leaders import NO_ELECTIONS, ElectLeadersHandler, LeaderElections
from broker.handlers.fetch import FetchHandler
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.partition_reassignments import (
    NO_REASSIGNMENTS,
    AlterPartitionReassignmentsHandler,
    ListPartitionReassignmentsHandler,
    PartitionReassignments,
)
from broker.handlers.produce import ProduceHandler
from broker.handlers.replica_tracking import NO_REPLICATION, ReplicaTracking
from broker.log.log_manager import LogManager
from broker.log.log_metrics import log_samples
from broker.topology import Topology, TransactionVerifier


def add_data_apis(
    context: BrokerContext,
    topology: Topology,
    log_manager: LogManager,
    brokers: BrokerConfigs,
    *,
    transaction_verifier: TransactionVerifier,
    replication: ReplicaTracking = NO_REPLICATION,
    leader_elections: LeaderElections = NO_ELECTIONS,
    partition_reassignments: PartitionReassignments = NO_REASSIGNMENTS,
) -> None:
    """Register the data and admin APIs over `log_manager`; `brokers` is the broker
    resource's dynamic configs (stored, and changing the running server);
    `transaction_verifier` is Produce's KIP-890 check (the transaction coordinator's,
    which registers InitProducerId); `replication` is the deployment's follower tracking."""
    config = context.config
    node_id = context.node_id
    alterer = ConfigAlterer(log_manager, brokers)
    stats = BrokerTopicStats(context.metrics)
    context.metrics.add_collector(
        functools.partial(log_samples, log_manager, topology.is_local_leader)
    )
    auth = context.authorizer
    for handler in (
        ProduceHandler(
            log_manager,
            stats,
            authorizer=auth,
            transaction_verifier=transaction_verifier,
            replication=replication,
            current_leaders=CurrentLeaders(topology),
        ),
        FetchHandler(
            log_manager,
            stats,
            authorizer=auth,
            replication=replication,
            current_leaders=CurrentLeaders(topology),
        ),
        ListOffsetsHandler(log_manager, authorizer=auth),
        OffsetForLeaderEpochHandler(log_manager, authorizer=auth),
        CreateTopicsHandler(
            log_manager,
            config,
            authorizer=auth,
            registered_brokers=topology.registered_brokers,
            max_replication_factor=topology.max_replication_factor,
        ),
        DeleteTopicsHandler(
            log_manager,
            config.log.delete_topic_enable,
            on_deleted=stats.remove_topic,
            authorizer=auth,
        ),
        CreatePartitionsHandler(log_manager, node_id, authorizer=auth),
        DeleteRecordsHandler(log_manager, authorizer=auth),
        DescribeConfigsHandler(
            log_manager, config, brokers, authorizer=auth, cleaner_state=log_manager.cleaner_state
        ),
        AlterConfigsHandler(alterer, authorizer=auth),
        IncrementalAlterConfigsHandler(alterer, authorizer=auth),
        DescribeLogDirsHandler(context.log_dirs, log_manager.local_logs, authorizer=auth),
        ElectLeadersHandler(log_manager, leader_elections, authorizer=auth),
        AlterPartitionReassignmentsHandler(log_manager, partition_reassignments, authorizer=auth),
        ListPartitionReassignmentsHandler(partition_reassignments, authorizer=auth),
        DescribeClusterHandler(
            node_id,
            context.cluster_id,
            context.advertised_endpoint,
            authorizer=auth,
            topology=topology,
        ),
    ):
        context.apis.add_handler(handler)
