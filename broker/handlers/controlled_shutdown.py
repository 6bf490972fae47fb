"""ControlledShutdown (key 7): a broker about to stop asks the controller to move the
leadership of every partition it leads to another in-sync replica and to take it out
of every ISR (Kafka 2.x's KafkaApis.handleControlledShutdownRequest).

The answer lists the partitions it still leads (no other ISR member is live); the
asking broker tries again or stops anyway. A broker that is not the controller
answers NOT_CONTROLLER (the decision raises KafkaError), and the asker finds the
controller again. Only brokers send it: every version needs CLUSTER_ACTION, which
the authorization middleware checks (`cluster_action_from`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse
from broker.protocol.messages.controlled_shutdown_response import RemainingPartition

log = logging.getLogger(__name__)

ControlledShutdown = Callable[[int, int], Awaitable[Sequence[tuple[str, int]]]]
"""broker id, broker epoch (-1 before v2) -> the (topic, partition)s it still leads;
KafkaError NOT_CONTROLLER where this broker is not the controller, STALE_BROKER_EPOCH
from an older registration of that broker than the live one."""


class ControlledShutdownHandler:
    api_key = ApiKey.CONTROLLED_SHUTDOWN
    min_version = 0
    max_version = 3
    cluster_action_from = 0  # every version (middleware/authorization)

    def __init__(self, controlled_shutdown: ControlledShutdown) -> None:
        self._controlled_shutdown = controlled_shutdown

    async def handle(
        self, request: Request[ControlledShutdownRequest]
    ) -> ControlledShutdownResponse:
        broker_id = request.body.broker_id
        log.info("controlled shutdown asked by broker %d", broker_id)
        remaining = await self._controlled_shutdown(broker_id, request.body.broker_epoch)
        return ControlledShutdownResponse(
            error_code=ErrorCode.NONE,
            remaining_partitions=tuple(
                RemainingPartition(topic_name=topic, partition_index=partition)
                for topic, partition in remaining
            ),
        )

    def error_response(
        self, request: Request[ControlledShutdownRequest], error_code: int
    ) -> ControlledShutdownResponse:
        return ControlledShutdownResponse(error_code=error_code)
