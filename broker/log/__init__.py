"""The broker's durable, segmented log (interface: docs/design/log-api.md)."""

from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from broker.log.results import AppendResult, ReadResult
from broker.log.topic import Topic

__all__ = ["AppendResult", "LogConfig", "LogManager", "PartitionLog", "ReadResult", "Topic"]
