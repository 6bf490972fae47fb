"""A BrokerNotifier that keeps what the controller would have sent, per broker."""

from __future__ import annotations

from broker.replication.broker_notifier import LeaderAndIsrRequest, UpdateMetadataRequest
from broker.replication.controller_decisions import PartitionState
from broker.replication.topic_partition import TopicPartition


class RecordingNotifier:
    def __init__(self) -> None:
        self.leader_and_isr: list[tuple[int, LeaderAndIsrRequest]] = []
        self.update_metadata: list[tuple[int, UpdateMetadataRequest]] = []

    def send_leader_and_isr(self, broker_id: int, request: LeaderAndIsrRequest) -> None:
        self.leader_and_isr.append((broker_id, request))

    def send_update_metadata(self, broker_id: int, request: UpdateMetadataRequest) -> None:
        self.update_metadata.append((broker_id, request))

    def latest_told(self, broker_id: int, tp: TopicPartition) -> PartitionState | None:
        """The last state of `tp` a LeaderAndIsr request gave the broker."""
        told = None
        for to, request in self.leader_and_isr:
            for state in request.partition_states:
                if to == broker_id and state.topic_partition == tp:
                    told = state
        return told
