"""KIP-951: where a partition's leader is, told in the answer that says it is not here.

A Produce (v10+) or Fetch (v16+) partition answered NOT_LEADER_OR_FOLLOWER (Fetch: also
FENCED_LEADER_EPOCH) carries the leader and leader epoch this broker knows
(`current_leader`), and the response the endpoints of those leaders on the listener the
request came in on (`node_endpoints`), so a client moves to the new leader without first
asking Metadata: after a leader change its producers and consumers resume one round trip
sooner. Both are tagged fields: older clients never read them. The leader comes from the
deployment's Topology, as Metadata reports it; an offline or unknown leader is left out
(the client then refreshes its metadata as before).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.protocol.error_codes import ErrorCode
from broker.topology import Topology

PRODUCE_FROM = 10
FETCH_FROM = 16
PRODUCE_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
FETCH_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})

Endpoint = tuple[int, str, int, str | None]
"""(node id, host, port, rack) on one listener."""


class CurrentLeaders:
    def __init__(self, topology: Topology) -> None:
        self._topology = topology

    def leader(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) where a live leader is known, else None."""
        try:
            found = self._topology.partition_leader(topic, partition)
        except (KeyError, LookupError):
            return None
        if not found.online or found.node_id < 0:
            return None
        return found.node_id, -1 if found.leader_epoch is None else found.leader_epoch

    def endpoints(self, node_ids: Iterable[int], listener_name: str) -> list[Endpoint]:
        wanted = set(node_ids)
        return [
            (node_id, host, port, self._topology.rack(node_id))
            for node_id, host, port in self._topology.brokers(listener_name)
            if node_id in wanted
        ]
