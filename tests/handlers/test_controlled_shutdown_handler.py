"""ControlledShutdown (key 7): the controller's answer as Kafka's response, and
NOT_CONTROLLER from a broker that is not the active controller."""

from __future__ import annotations

from functools import partial
from typing import cast

import pytest
import trio_util

from broker.coordination.controller_election import ControllerView
from broker.coordination.kafka_controller import KafkaController
from broker.coordination.store import CoordinationStore
from broker.errors import KafkaError
from broker.handlers.controlled_shutdown import ControlledShutdownHandler
from broker.hosts.controlled_shutdown import answer_controlled_shutdown
from broker.hosts.zookeeper_deployment import WatchingBrokers
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ControlledShutdownRequest
from broker.protocol.messages.controlled_shutdown_response import RemainingPartition
from tests.handlers.request_factory import make_request


def request(
    broker_id: int, version: int = 3, broker_epoch: int = -1
) -> Request[ControlledShutdownRequest]:
    body = ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch)
    return make_request(body, ApiKey.CONTROLLED_SHUTDOWN, version)


async def test_the_answer_lists_the_partitions_the_broker_still_leads() -> None:
    asked = []

    async def decide(broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        asked.append((broker_id, broker_epoch))
        return [("orders", 2)]

    handler = ControlledShutdownHandler(decide)
    response = await handler.handle(request(3, broker_epoch=4294967310))
    assert asked == [(3, 4294967310)]
    assert response.error_code == ErrorCode.NONE
    assert response.remaining_partitions == (
        RemainingPartition(topic_name="orders", partition_index=2),
    )


async def test_a_broker_that_is_not_the_controller_answers_not_controller() -> None:
    # Never activated (this broker was not elected): no inbox, no ZooKeeper call made.
    controller = KafkaController(
        cast(CoordinationStore, None),
        1,
        trio_util.AsyncValue(ControllerView()),
        trio_util.AsyncValue({}),
        WatchingBrokers(),
    )
    with pytest.raises(KafkaError) as raised:
        await answer_controlled_shutdown(controller, 2, -1)
    assert raised.value.error_code == ErrorCode.NOT_CONTROLLER
    handler = ControlledShutdownHandler(partial(answer_controlled_shutdown, controller))
    answer = handler.error_response(request(2), raised.value.error_code)
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
    assert answer.remaining_partitions == ()
