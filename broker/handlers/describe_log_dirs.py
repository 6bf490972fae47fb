"""DescribeLogDirs (key 35): each log dir of this broker, with the partitions it holds.

Every replica counts, a follower's as much as a leader's (Kafka's
ReplicaManager.describeLogDirs): its size on disk and its offset lag, the high
watermark less the log end, never below 0. A dir's total and usable bytes (v4)
come from the file system.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from broker.handlers.auth_helper import check_cluster
from broker.log.partition_log import PartitionLog
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from broker.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.DESCRIBE_LOG_DIRS


class DescribeLogDirsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 4

    def __init__(
        self,
        log_dirs: Sequence[Path],
        local_logs: Callable[[], Iterable[PartitionLog]],
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        # Reported absolute, as Kafka does; resolved once, not on the event loop per request.
        self._absolute = {d: d.resolve() for d in log_dirs}
        self._local_logs = local_logs
        self._authorizer = authorizer

    async def handle(self, request: Request[DescribeLogDirsRequest]) -> DescribeLogDirsResponse:
        check_cluster(self._authorizer, request, AclOperation.DESCRIBE)
        wanted = request.body.topics
        chosen = None if wanted is None else {(t.topic, p) for t in wanted for p in t.partitions}
        by_dir: dict[Path, dict[str, list[DescribeLogDirsPartition]]] = {
            d: {} for d in self._absolute.values()
        }
        for log in self._local_logs():
            if chosen is not None and (log.topic, log.partition) not in chosen:
                continue
            partition = DescribeLogDirsPartition(
                partition_index=log.partition,
                partition_size=log.size_bytes,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
            )
            parent = log.directory.parent
            topics = by_dir.setdefault(self._absolute.get(parent, parent), {})
            topics.setdefault(log.topic, []).append(partition)
        return DescribeLogDirsResponse(
            results=tuple(_result(d, topics) for d, topics in sorted(by_dir.items()))
        )

    def error_response(self, request: Request, error_code: int) -> DescribeLogDirsResponse:
        return DescribeLogDirsResponse(error_code=error_code)


def _result(
    log_dir: Path, topics: dict[str, list[DescribeLogDirsPartition]]
) -> DescribeLogDirsResult:
    try:
        stat = os.statvfs(log_dir)
        total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
    except OSError:
        return DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(log_dir))
    return DescribeLogDirsResult(
        log_dir=str(log_dir),
        topics=tuple(
            DescribeLogDirsTopic(
                name=name, partitions=tuple(sorted(ps, key=lambda p: p.partition_index))
            )
            for name, ps in sorted(topics.items())
        ),
        total_bytes=total,
        usable_bytes=usable,
    )
