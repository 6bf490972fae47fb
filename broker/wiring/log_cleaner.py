"""Wiring of the log cleaner (broker/log/log_cleaner.py): one service over the
partitions this process leads, with its metrics, unless log.cleaner.enable=false."""

from __future__ import annotations

from collections.abc import Iterator

from broker.broker_context import BrokerContext
from broker.log import LogManager
from broker.log.log_cleaner import CleanerSettings, LogCleaner
from broker.log.partition_log import PartitionLog


def add_log_cleaner(context: BrokerContext, log_manager: LogManager) -> LogCleaner | None:
    config = context.config
    if not config.get_bool("log.cleaner.enable"):
        return None

    def local_logs() -> Iterator[PartitionLog]:
        for topic in list(log_manager.topics().values()):
            for partition in list(topic.partitions):
                if isinstance(partition, PartitionLog):  # not another process's
                    yield partition

    cleaner = LogCleaner(CleanerSettings.from_config(config), local_logs, clock=log_manager.clock)
    context.metrics.add_collector(cleaner.samples)
    return cleaner
