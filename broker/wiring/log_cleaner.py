"""Wiring of the log cleaner's metrics (the LogManager owns and runs the cleaner,
as Kafka's does: broker/log/log_cleaner.py)."""

from __future__ import annotations

from broker.broker_context import BrokerContext
from broker.log.log_manager import LogManager


def add_log_cleaner_metrics(context: BrokerContext, log_manager: LogManager) -> None:
    """kafka.log:type=LogCleaner / LogCleanerManager gauges, when a cleaner runs."""
    if log_manager.cleaner is not None:
        context.metrics.add_collector(log_manager.cleaner.samples)
