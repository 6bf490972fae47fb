"""Wiring of client quotas into the broker: configs, quota managers, APIs, metrics.

The stored quotas are loaded from the first log dir before any request; the
quota managers are installed around every handler (the ClientQuotas middleware), the
per-IP connection-rate quotas are handed to the connection quotas, and the
quota sensors are published under Kafka's metric names.
"""

from __future__ import annotations

from broker.broker_context import BrokerContext
from broker.handlers.alter_client_quotas import AlterClientQuotasHandler
from broker.handlers.describe_client_quotas import DescribeClientQuotasHandler
from broker.handlers.middleware.client_quotas import ClientQuotas
from broker.quotas.client_quota_configs import ClientQuotaConfigs
from broker.quotas.quota_managers import IpRateListener, QuotaManagers
from broker.quotas.quota_store import QuotaStore


def add_quota_apis(
    context: BrokerContext, update_ip_connection_rate: IpRateListener, store: QuotaStore
) -> QuotaManagers:
    """The quota managers, installed around every handler, with their APIs and metrics;
    per-IP connection-rate quotas go to `update_ip_connection_rate` (the acceptors'),
    changes to `store` (the deployment's)."""
    config = context.config
    quotas = QuotaManagers(
        float(config.quotas.window_size_seconds),
        config.quotas.window_num,
        configs=ClientQuotaConfigs(store.load()),
    )
    quotas.add_ip_rate_listener(update_ip_connection_rate)
    context.apis.use(ClientQuotas(quotas))
    context.metrics.add_collector(quotas.metric_samples)
    auth = context.authorizer
    context.apis.add_handler(DescribeClientQuotasHandler(quotas.configs, authorizer=auth))
    context.apis.add_handler(AlterClientQuotasHandler(quotas, store, authorizer=auth))
    return quotas
