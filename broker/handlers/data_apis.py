"""Wiring of the log and the data and admin APIs into the broker.

One call from KafkaServer._add_subsystems: the LogManager becomes a service
(started before the network, so it has recovered every partition before the
first request), every handler here is registered, and Metadata gets its
topics from the log.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from broker.broker_topic_stats import BrokerTopicStats
from broker.handlers.alter_configs import (
    AlterConfigsHandler,
    ConfigAlterer,
    IncrementalAlterConfigsHandler,
)
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_records import DeleteRecordsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_cluster import DescribeClusterHandler
from broker.handlers.describe_configs import DescribeConfigsHandler
from broker.handlers.fetch import FetchHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.log_topics import LogTopicSource
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.produce import ProduceHandler
from broker.log import LogManager
from broker.log.log_metrics import log_samples

if TYPE_CHECKING:
    from broker.server import KafkaServer


def add_data_apis(server: KafkaServer) -> LogManager:
    """Create the log, register the data and admin APIs; returns the log for the server."""
    config = server.config
    node_id = server.node_id
    cluster = server.cluster
    log_manager = LogManager(config) if cluster is None else cluster.log_manager
    server.services.append(log_manager)
    brokers = BrokerConfigs(server)
    alterer = ConfigAlterer(log_manager, brokers)
    server.metadata.topics = (
        LogTopicSource(log_manager, node_id) if cluster is None else cluster.topic_source()
    )
    stats = BrokerTopicStats(server.metrics)
    server.metrics.add_collector(functools.partial(log_samples, log_manager))
    auth = server.authorizer
    for handler in (
        ProduceHandler(log_manager, stats, authorizer=auth),
        FetchHandler(log_manager, stats, authorizer=auth),
        ListOffsetsHandler(log_manager, authorizer=auth),
        OffsetForLeaderEpochHandler(log_manager, authorizer=auth),
        InitProducerIdHandler(log_manager, authorizer=auth),
        CreateTopicsHandler(log_manager, config, authorizer=auth),
        DeleteTopicsHandler(
            log_manager,
            config.get_bool("delete.topic.enable"),
            on_deleted=stats.remove_topic,
            authorizer=auth,
        ),
        CreatePartitionsHandler(log_manager, node_id, authorizer=auth),
        DeleteRecordsHandler(log_manager, authorizer=auth),
        DescribeConfigsHandler(log_manager, config, brokers, authorizer=auth),
        AlterConfigsHandler(alterer, authorizer=auth),
        IncrementalAlterConfigsHandler(alterer, authorizer=auth),
        DescribeClusterHandler(
            node_id, server.cluster_id, server.socket_server.advertised_endpoint, authorizer=auth
        ),
    ):
        server.apis.add_handler(handler)
    return log_manager
