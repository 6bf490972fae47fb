"""The controlled shutdown's retries: asked again after the backoff while another broker
is live, given up at once by the last live broker (nothing could take its leaderships)."""

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

BACKOFF_S = 5.0


async def never_moved() -> None:
    raise AssertionError("no attempt succeeds here")


def shutdown(live: Mapping[int, BrokerRegistration]) -> ControlledShutdown:
    # No controller elected: every attempt fails before any request is sent.
    return ControlledShutdown(
        1,
        BrokerConnector(InterBrokerSecurity("PLAINTEXT"), trio_util.AsyncValue(live)),
        cast(KafkaController, None),
        trio_util.AsyncValue(ControllerView()),
        trio_util.AsyncValue(live),
        never_moved,
        lambda: None,
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
