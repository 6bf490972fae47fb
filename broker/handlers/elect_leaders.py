"""ElectLeaders (key 43): move leadership to each partition's preferred replica
(PREFERRED), or to any live replica where no in-sync one is left (UNCLEAN).

The election itself is the deployment's (`LeaderElections`): hosts coordinated through
ZooKeeper ask their controller (broker/hosts/leader_elections.py); where every
partition has a single replica, its leader, there is nothing to elect.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

from broker.handlers.auth_helper import check_cluster
from broker.handlers.log_view import LogManagerView
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from broker.protocol.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.ELECT_LEADERS

TopicPartitionKey = tuple[str, int]
ElectionResult = tuple[int, str | None]  # error code, message


class ElectionType(enum.IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


class LeaderElections(Protocol):
    async def elect(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey], timeout_s: float
    ) -> dict[TopicPartitionKey, ElectionResult]:
        """Each partition's outcome: NONE once elected, ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, REQUEST_TIMED_OUT."""
        ...


class SingleReplicaElections:
    """One replica per partition, always its leader."""

    async def elect(
        self, election_type: ElectionType, partitions: Sequence[TopicPartitionKey], timeout_s: float
    ) -> dict[TopicPartitionKey, ElectionResult]:
        return {
            tp: (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed") for tp in partitions
        }


NO_ELECTIONS = SingleReplicaElections()


class ElectLeadersHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 2

    def __init__(
        self,
        log_manager: LogManagerView,
        elections: LeaderElections = NO_ELECTIONS,
        *,
        authorizer: Authorizer = ALLOW_ALL,
    ) -> None:
        self._logs = log_manager
        self._elections = elections
        self._authorizer = authorizer

    async def handle(self, request: Request[ElectLeadersRequest]) -> ElectLeadersResponse:
        check_cluster(self._authorizer, request, AclOperation.ALTER)
        body = request.body
        try:
            election_type = ElectionType(body.election_type)
        except ValueError:
            return self.error_response(request, ErrorCode.INVALID_REQUEST)
        if body.topic_partitions is None:  # every partition
            wanted = [
                (name, p.partition) for name, t in self._logs.topics().items() for p in t.partitions
            ]
        else:
            wanted = [(t.topic, p) for t in body.topic_partitions for p in t.partitions]
        results: dict[TopicPartitionKey, ElectionResult] = {}
        known = []
        for name, partition in wanted:
            topic = self._logs.topic(name)
            if topic is None or not 0 <= partition < len(topic.partitions):
                missing = f"The partition {name}-{partition} does not exist."
                results[(name, partition)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing)
            else:
                known.append((name, partition))
        if known:
            results.update(
                await self._elections.elect(election_type, known, body.timeout_ms / 1000)
            )
        by_topic: dict[str, list[PartitionResult]] = {}
        for (name, partition), (code, message) in sorted(results.items()):
            by_topic.setdefault(name, []).append(
                PartitionResult(partition_id=partition, error_code=code, error_message=message)
            )
        return ElectLeadersResponse(
            replica_election_results=tuple(
                ReplicaElectionResult(topic=name, partition_result=tuple(ps))
                for name, ps in by_topic.items()
            )
        )

    def error_response(self, request: Request, error_code: int) -> ElectLeadersResponse:
        body: ElectLeadersRequest = request.body
        return ElectLeadersResponse(
            error_code=error_code,
            replica_election_results=tuple(
                ReplicaElectionResult(
                    topic=t.topic,
                    partition_result=tuple(
                        PartitionResult(partition_id=p, error_code=error_code) for p in t.partitions
                    ),
                )
                for t in body.topic_partitions or ()
            ),
        )
