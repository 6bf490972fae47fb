"""The controlled shutdown's retries: asked again after the backoff while another broker
is live, given up at once by the last live broker (nothing could take its leaderships);
and its replica fetchers, which follow the ISRs that still name it until the controller
has answered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import trio
import trio_util
from trio.testing import MockClock

from broker.coordination.broker_registration import BrokerRegistration
from broker.coordination.controller_election import ControllerView
from broker.coordination.kafka_controller import KafkaController
from broker.hosts.controlled_shutdown import ControlledShutdown
from broker.hosts.inter_broker_security import BrokerConnector, InterBrokerSecurity
from broker.hosts.replication_settings import ControlledShutdownSettings
from broker.replication.topic_partition import TopicPartition

BACKOFF_S = 5.0


async def never_moved() -> None:
    raise AssertionError("no attempt succeeds here")


class RecordedFollowing:
    """The replica fetchers as the shutdown drives them, into a shared record."""

    def __init__(self, record: list[object]) -> None:
        self._record = record

    def leave_isrs(self) -> None:
        self._record.append("leave the ISRs")

    def stop(self) -> None:
        self._record.append("stop following")


def shutdown(live: Mapping[int, BrokerRegistration]) -> ControlledShutdown:
    # No controller elected: every attempt fails before any request is sent.
    return ControlledShutdown(
        1,
        BrokerConnector(InterBrokerSecurity("PLAINTEXT"), trio_util.AsyncValue(live)),
        cast(KafkaController, None),
        trio_util.AsyncValue(ControllerView()),
        trio_util.AsyncValue(live),
        never_moved,
        RecordedFollowing([]),
        ControlledShutdownSettings(max_retries=3, retry_backoff_s=BACKOFF_S),
    )


async def test_a_broker_with_another_live_broker_asks_again_after_each_backoff(
    autojump_clock: MockClock,
) -> None:
    live = {1: BrokerRegistration(1, ()), 2: BrokerRegistration(2, ())}
    started = trio.current_time()
    await shutdown(live).run()
    assert trio.current_time() - started == 2 * BACKOFF_S


async def test_the_last_live_broker_stops_without_waiting_out_the_retries(
    autojump_clock: MockClock,
) -> None:
    started = trio.current_time()
    controlled = shutdown({1: BrokerRegistration(1, ())})
    await controlled.run()
    assert trio.current_time() - started == 0
    assert not controlled.succeeded


class AnsweringController:
    """The controller's decision, recorded: every leadership moved at once."""

    def __init__(self, record: list[object]) -> None:
        self._record = record

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        self._record.append(("asked", broker_id, broker_epoch))
        return []


async def test_the_broker_follows_until_the_controller_took_it_out_of_the_isrs() -> None:
    # Stopping its fetchers first held acks=all back on the partitions it followed until
    # the ISR change reached their leaders (0.1-0.8 s here; Kafka waits for StopReplica).
    record: list[object] = []

    async def moved() -> None:
        record.append("leaderships moved")

    live = trio_util.AsyncValue({1: BrokerRegistration(1, (), broker_epoch=4294967310)})
    controlled = ControlledShutdown(
        1,
        BrokerConnector(InterBrokerSecurity("PLAINTEXT"), live),
        cast(KafkaController, AnsweringController(record)),
        trio_util.AsyncValue(ControllerView(controller_id=1)),
        live,
        moved,
        RecordedFollowing(record),
        ControlledShutdownSettings(max_retries=3, retry_backoff_s=BACKOFF_S),
    )
    await controlled.run()
    assert controlled.succeeded
    # Asked with its broker epoch (its registration's czxid), as Kafka's KIP-380.
    assert record == [
        "leave the ISRs",
        ("asked", 1, 4294967310),
        "leaderships moved",
        "stop following",
    ]
