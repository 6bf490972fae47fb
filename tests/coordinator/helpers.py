"""Drive a ClassicGroup / GroupCoordinator without a network."""

from __future__ import annotations

import attrs

from broker.coordinator.member_metadata import JoinParams, JoinResult, SyncResult
from broker.protocol.api import encode_message
from broker.protocol.messages import ConsumerProtocolSubscription


def subscription(*topics: str) -> bytes:
    body = b"".join(
        bytes(c) for c in encode_message(ConsumerProtocolSubscription(topics=topics), 0)
    )
    return b"\x00\x00" + body


def params(
    member_id: str = "",
    instance_id: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b""),),
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    protocol_type: str = "consumer",
    require_known_member_id: bool = True,
) -> JoinParams:
    return JoinParams(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id="client",
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=protocols,
        require_known_member_id=require_known_member_id,
    )


@attrs.define
class Answers:
    """Collects the answers callbacks deliver."""

    joins: list[JoinResult] = attrs.field(factory=list)
    syncs: list[SyncResult] = attrs.field(factory=list)

    def join(self, result: JoinResult) -> None:
        self.joins.append(result)

    def sync(self, result: SyncResult) -> None:
        self.syncs.append(result)
