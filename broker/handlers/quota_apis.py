"""Wiring of client quotas into the broker: configs, quota managers, APIs, metrics.

The stored quotas are loaded from the first log dir before any request; the
quota managers are installed around every handler (KafkaApis.quotas), the
per-IP connection-rate quotas are handed to the connection quotas, and the
quota sensors are published under Kafka's metric names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.handlers.alter_client_quotas import AlterClientQuotasHandler
from broker.handlers.describe_client_quotas import DescribeClientQuotasHandler
from broker.quotas.client_quota_configs import ClientQuotaConfigs
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore

if TYPE_CHECKING:
    from broker.server import KafkaServer


def add_quota_apis(server: KafkaServer) -> QuotaManagers:
    config = server.config
    store = QuotaStore(server.log_dirs[0])
    quotas = QuotaManagers(
        float(config.get_int("quota.window.size.seconds")),
        config.get_int("quota.window.num"),
        configs=ClientQuotaConfigs(store.load()),
    )
    quotas.add_ip_rate_listener(server.socket_server.quotas.update_ip_connection_rate_quota)
    server.apis.quotas = quotas
    server.metrics.add_collector(quotas.metric_samples)
    auth = server.authorizer
    server.apis.add_handler(DescribeClientQuotasHandler(quotas.configs, authorizer=auth))
    server.apis.add_handler(AlterClientQuotasHandler(quotas, store, authorizer=auth))
    return quotas
