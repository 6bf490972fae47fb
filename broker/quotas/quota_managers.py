"""Kafka's QuotaManagers and the throttling it does around KafkaApis (KIP-219).

KafkaApis asks two questions of this object: before a handler runs, whether the
request must be narrowed (a fetch never asks for more than the client's quota
allows in one window); and once the response body is known, how long the client
is throttled. The answer goes into the body's `throttle_time_ms` and KafkaApis
mutes the channel for that long after sending the response at once.

- Produce records the request size after the append; fetch records the response
  size, and a throttled fetch is answered empty (its bytes unrecorded) as Kafka
  does, so a throttled consumer gets no data until its throttle is over.
- Every request also records its handler time against `request_percentage`
  (percent of one thread, over the window), except acks=0 produce, which Kafka
  never throttles for request time; the network thread's time writing the
  response is added once it is written, for the client's next requests.
- The largest applicable throttle is used, and recorded in the throttle-time
  metric of the quota that gave it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from broker.metrics import MetricSample
from broker.net.request import Request
from broker.net.unsent_answers import CloseConnection, NoResponse
from broker.protocol.api import ApiKey
from broker.protocol.messages import FetchResponse
from broker.quotas.client_quota_configs import ClientQuotaConfigs
from broker.quotas.client_quota_entity import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaEntity,
    user_of,
)
from broker.quotas.client_quota_manager import ClientQuotaManager

log = logging.getLogger(__name__)

_NANOS_TO_PERCENT = 100.0 / 1e9

Clock = Callable[[], float]
IpRateListener = Callable[[str | None, float | None], None]


class QuotaManagers:
    """The produce, fetch and request quota managers, fed from the client-quota configs."""

    def __init__(
        self,
        window_s: float,
        samples: int,
        *,
        clock: Clock = time.monotonic,
        configs: ClientQuotaConfigs | None = None,
    ) -> None:
        self._clock = clock
        self.configs = configs if configs is not None else ClientQuotaConfigs()
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window_s, samples, clock=clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window_s, samples, clock=clock)
        # Kafka bounds only request-time throttles, at one window.
        self.request = ClientQuotaManager(
            REQUEST_PERCENTAGE, window_s, samples, max_throttle_ms=window_s * 1000, clock=clock
        )
        self._ip_listeners: list[IpRateListener] = []
        for entity, values in self.configs:
            self._apply(entity, {}, values)

    @property
    def managers(self) -> tuple[tuple[str, ClientQuotaManager], ...]:
        return (("Produce", self.produce), ("Fetch", self.fetch), ("Request", self.request))

    # ---- configuration

    def add_ip_rate_listener(self, listener: IpRateListener) -> None:
        """Told (ip or None for the default, rate or None) of every connection-rate quota,
        the current ones at once."""
        self._ip_listeners.append(listener)
        for entity, values in self.configs:
            if entity.is_ip and CONNECTION_CREATION_RATE in values:
                listener(entity.name("ip"), values[CONNECTION_CREATION_RATE])

    def set_quotas(self, entity: ClientQuotaEntity, values: Mapping[str, float]) -> None:
        """Replace an entity's quotas (validated by the caller) and apply them."""
        before = dict(self.configs.get(entity))
        self.configs.set(entity, values)
        self._apply(entity, before, values)

    def set_all_quotas(self, stored: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        """Every entity's quotas as `stored` holds them (a store read whole: another
        process's or ZooKeeper's changes included); an entity not there has none."""
        for entity in {entity for entity, _ in self.configs} | set(stored):
            self.set_quotas(entity, stored.get(entity, {}))

    def _apply(
        self, entity: ClientQuotaEntity, before: Mapping[str, float], after: Mapping[str, float]
    ) -> None:
        if entity.is_ip:
            if before.get(CONNECTION_CREATION_RATE) != after.get(CONNECTION_CREATION_RATE):
                for listener in self._ip_listeners:
                    listener(entity.name("ip"), after.get(CONNECTION_CREATION_RATE))
            return
        for _, manager in self.managers:
            manager.update_quota(entity, after.get(manager.quota_key))

    # ---- the request path

    @staticmethod
    def _client(request: Request) -> tuple[str, str]:
        return user_of(request.context.principal), request.header.client_id or ""

    def before_handle(self, request: Request) -> None:
        """Cap a consumer's fetch at what its quota allows in one window (Kafka's
        maxQuotaWindowBytes), so one fetch cannot take many windows' worth."""
        if request.api_key != ApiKey.FETCH or not self.fetch.enabled or request.body is None:
            return
        body = request.body
        if _is_replica_fetch(body):
            return
        window_bytes = self.fetch.max_value_in_quota_window(*self._client(request))
        if window_bytes < body.max_bytes:
            request.body = body._replace(
                max_bytes=int(window_bytes), min_bytes=min(body.min_bytes, int(window_bytes))
            )

    def on_response(
        self, request: Request, outcome: Any, response_size: Callable[[Any], int]
    ) -> tuple[Any, int]:
        """The outcome to send (with its throttle_time_ms) and the channel throttle in ms."""
        if isinstance(outcome, CloseConnection) or not (
            self.produce.enabled or self.fetch.enabled or self.request.enabled
        ):
            return outcome, 0
        api_key = request.api_key
        user, client_id = self._client(request)
        now = self._clock()
        bandwidth_ms = 0
        bandwidth: ClientQuotaManager | None = None
        fetch_size = 0
        if api_key == ApiKey.PRODUCE and self.produce.enabled:
            bandwidth = self.produce
            bandwidth_ms = self.produce.record_and_get_throttle_ms(
                user, client_id, request.size_bytes, now
            )
        elif (
            api_key == ApiKey.FETCH
            and self.fetch.enabled
            and isinstance(outcome, FetchResponse)
            and not _is_replica_fetch(request.body)
        ):
            bandwidth = self.fetch
            fetch_size = response_size(outcome)
            bandwidth_ms = self.fetch.record_and_get_throttle_ms(user, client_id, fetch_size, now)
        request_ms = 0
        if self.request.enabled and not isinstance(outcome, NoResponse):
            end_ns = request.api_local_complete_ns or time.perf_counter_ns()
            busy_ns = max(end_ns - request.dequeue_ns, 0) if request.dequeue_ns else 0
            request_ms = self.request.record_and_get_throttle_ms(
                user, client_id, busy_ns * _NANOS_TO_PERCENT, now
            )
        throttle_ms = max(bandwidth_ms, request_ms)
        if throttle_ms <= 0:
            return outcome, 0
        if bandwidth is not None and bandwidth_ms >= request_ms:
            bandwidth.record_throttle_time(user, client_id, throttle_ms, now)
        else:
            self.request.record_throttle_time(user, client_id, throttle_ms, now)
        if fetch_size and outcome.error_code == 0:
            # KIP-219: a throttled fetch is answered empty; its bytes were never sent.
            self.fetch.unrecord(user, client_id, fetch_size, now)
            outcome = FetchResponse(
                throttle_time_ms=throttle_ms, error_code=0, session_id=outcome.session_id
            )
        elif hasattr(outcome, "throttle_time_ms"):
            outcome = outcome._replace(throttle_time_ms=max(outcome.throttle_time_ms, throttle_ms))
        return outcome, throttle_ms

    def on_sent(self, request: Request) -> Callable[[], None] | None:
        """What the processor runs once the response is written: the network thread's
        time writing it counts towards `request_percentage` for the client's next
        requests (Kafka charges network-thread time without throttling for it)."""
        if not self.request.enabled:
            return None
        user, client_id = self._client(request)
        manager = self.request

        def record_network_time() -> None:
            if request.response_dequeue_ns:
                busy_ns = max(time.perf_counter_ns() - request.response_dequeue_ns, 0)
                manager.record_no_throttle(user, client_id, busy_ns * _NANOS_TO_PERCENT)

        return record_network_time

    # ---- metrics

    def metric_samples(self) -> Iterable[MetricSample]:
        """Kafka's quota metrics: kafka.server:type=Produce|Fetch|Request,user=,client-id=
        with byte-rate (request-time for Request) and throttle-time (the average)."""
        now = self._clock()
        for type_, manager in self.managers:
            rate_name = "request-time" if manager is self.request else "byte-rate"
            for tags, rate, throttle_avg, _ in manager.sensors(now):
                key = (("client-id", tags.client_id), ("user", tags.user))
                yield MetricSample("kafka.server", type_, rate_name, key, "gauge", {"value": rate})
                yield MetricSample(
                    "kafka.server", type_, "throttle-time", key, "gauge", {"value": throttle_avg}
                )


def _is_replica_fetch(body: Any) -> bool:
    """Follower fetches are exempt from client quotas, as in Kafka."""
    replica_id = getattr(body, "replica_id", -1)
    state = getattr(body, "replica_state", None)
    state_id = getattr(state, "replica_id", -1) if state is not None else -1
    return bool(replica_id >= 0 or state_id >= 0)
