"""A broker's controlled shutdown (Kafka 2.x's KafkaServer.controlledShutdown), run on
SIGTERM / `KafkaServer.shutdown()` before the listeners close.

It asks the controller, found through the election view, to move the leadership
of every partition it leads to another in-sync replica and to take it out of every
ISR: directly when it is the controller itself, else with ControlledShutdown (key 7,
with its broker epoch: its registration's czxid) over the controller's inter-broker
listener, logged in as the broker (`inter_broker_security.py`). Meanwhile it keeps
following every partition whose ISR still names it, so acks=all there never waits for a
replica that stopped fetching; it drops each one as its applied state shows it out of
the ISR (the controller's StopReplica in Kafka), so no leader takes it back in, and
stops following altogether once the shutdown is over. While partitions remain (no other
ISR member is live) or no controller answers, it asks again after
`controlled.shutdown.retry.backoff.ms`, `controlled.shutdown.max.retries` times in
all, then stops anyway; a broker that sees no other live broker stops at once, as no
retry could move anything (a departure from Kafka, whose last broker of a cluster waits
out every retry: 10 s by default, as long as `docker compose down` waits). After a success it waits (briefly) until its own view of the
partition states shows the new leaders, so the produce requests still arriving are
answered NOT_LEADER_OR_FOLLOWER and clients move on before the listeners close.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import trio
import trio_util

from broker.coordination.broker_registration import BrokerRegistration
from broker.coordination.controller_election import ControllerView
from broker.coordination.kafka_controller import (
    UNKNOWN_BROKER_EPOCH,
    KafkaController,
    NotControllerError,
    StaleBrokerEpochError,
)
from broker.errors import KafkaError
from broker.hosts.inter_broker_security import BrokerConnector
from broker.hosts.replication_settings import ControlledShutdownSettings
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ControlledShutdownRequest
from broker.replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
# One attempt (connect, the controller's decision, the answer) at most this long.
ATTEMPT_TIMEOUT_S = 30.0
# How long the broker waits to see its own leaderships gone after a success.
MOVED_WAIT_S = 5.0


class _AttemptFailed(Exception):
    pass


class Following(Protocol):
    """The broker's replica fetchers, as the shutdown drives them."""

    def leave_isrs(self) -> None:
        """Follow from now on only the partitions whose ISR names this broker."""

    def stop(self) -> None:
        """Follow nothing more."""


async def answer_controlled_shutdown(
    controller: KafkaController, broker_id: int, broker_epoch: int
) -> Sequence[tuple[str, int]]:
    """The ControlledShutdown handler's decision on this broker: NOT_CONTROLLER where
    it is not the active controller, STALE_BROKER_EPOCH from a replaced registration."""
    try:
        remaining = await controller.controlled_shutdown(broker_id, broker_epoch)
    except NotControllerError as exc:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, str(exc)) from None
    except StaleBrokerEpochError as exc:
        raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, str(exc)) from None
    return [(tp.topic, tp.partition) for tp in remaining]


class ControlledShutdown:
    def __init__(
        self,
        node_id: int,
        connector: BrokerConnector,
        controller: KafkaController,
        controller_view: trio_util.AsyncValue[ControllerView],
        live_brokers: trio_util.AsyncValue[Mapping[int, BrokerRegistration]],
        leaderships_moved: Callable[[], Awaitable[None]],
        following: Following,
        settings: ControlledShutdownSettings,
    ) -> None:
        """`leaderships_moved` returns once this broker leads no partition with another
        replica (as it applied the states); `following` is its replica fetchers."""
        self._node_id = node_id
        self._connector = connector
        self._controller = controller
        self._view = controller_view
        self._live = live_brokers
        self._leaderships_moved = leaderships_moved
        self._following = following
        self._settings = settings
        # The partitions still led here after the last answer; None before one came.
        self.remaining: list[TopicPartition] | None = None
        self.succeeded = False

    async def run(self) -> None:
        """Move this broker's leaderships away (or give up after the retries)."""
        if not self._settings.enable:
            return
        self._following.leave_isrs()
        try:
            await self._move_away()
        finally:
            self._following.stop()

    async def _move_away(self) -> None:
        for attempt in range(1, self._settings.max_retries + 1):
            try:
                with trio.fail_after(ATTEMPT_TIMEOUT_S):
                    self.remaining = await self._ask()
            except (_AttemptFailed, KafkaError, OSError, trio.TooSlowError) as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
            else:
                if not self.remaining:
                    self.succeeded = True
                    log.info("controlled shutdown succeeded: leadership moved to other replicas")
                    await self._wait_until_moved()
                    return
                log.warning(
                    "controlled shutdown attempt %d: %d partitions have no other in-sync "
                    "replica yet: %s",
                    attempt,
                    len(self.remaining),
                    ", ".join(str(tp) for tp in self.remaining),
                )
            if not self._others_live():
                log.warning("controlled shutdown: no other broker is live to lead; stopping")
                return
            if attempt < self._settings.max_retries:
                await trio.sleep(self._settings.retry_backoff_s)
        log.warning("controlled shutdown did not complete; stopping anyway")

    def _others_live(self) -> bool:
        return any(broker_id != self._node_id for broker_id in self._live.value)

    async def _ask(self) -> list[TopicPartition]:
        controller_id = self._view.value.controller_id
        if controller_id < 0:
            raise _AttemptFailed("no controller is elected")
        if controller_id == self._node_id:
            try:
                return await self._controller.controlled_shutdown(
                    self._node_id, self._broker_epoch()
                )
            except (NotControllerError, StaleBrokerEpochError) as exc:
                raise _AttemptFailed(str(exc)) from None
        async with await self._connector.connect(
            controller_id, f"controlled-shutdown-{self._node_id}"
        ) as connection:
            request = ControlledShutdownRequest(
                broker_id=self._node_id, broker_epoch=self._broker_epoch()
            )
            response = await connection.request(request, CONTROLLED_SHUTDOWN_VERSION)
        if response.error_code != ErrorCode.NONE:
            code = ErrorCode(response.error_code)
            raise _AttemptFailed(f"controller {controller_id} answered {code.name}")
        return [
            TopicPartition(p.topic_name, p.partition_index) for p in response.remaining_partitions
        ]

    def _broker_epoch(self) -> int:
        own = self._live.value.get(self._node_id)
        return UNKNOWN_BROKER_EPOCH if own is None else own.broker_epoch

    async def _wait_until_moved(self) -> None:
        with trio.move_on_after(MOVED_WAIT_S):
            await self._leaderships_moved()
