"""How the controller tells brokers about leadership (Kafka's LeaderAndIsr and
UpdateMetadata requests, sent by its ControllerChannelManager).

The controller decides in one task, one event at a time; a broker that is slow or
gone must never hold it up. So a notifier only queues: each call returns at once,
and the real one (the wiring step) sends each broker's queue in order over the
peer listener, dropping what is queued for a broker that left. The requests carry
the controller epoch, so a broker can ignore a deposed controller's requests, and
each partition's leader epoch, so it can ignore states older than its own.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from broker.replication.controller_decisions import PartitionState


@attrs.frozen
class LeaderAndIsrRequest:
    """To the replicas of these partitions: become leader or follower at this epoch."""

    controller_id: int
    controller_epoch: int
    partition_states: tuple[PartitionState, ...]


@attrs.frozen
class UpdateMetadataRequest:
    """To every live broker: the leaders and ISRs its Metadata answers should show."""

    controller_id: int
    controller_epoch: int
    partition_states: tuple[PartitionState, ...]
    live_brokers: tuple[int, ...]


class BrokerNotifier(Protocol):
    def send_leader_and_isr(self, broker_id: int, request: LeaderAndIsrRequest) -> None:
        """Queue the request for the broker; never blocks."""

    def send_update_metadata(self, broker_id: int, request: UpdateMetadataRequest) -> None:
        """Queue the request for the broker; never blocks."""
