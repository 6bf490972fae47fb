"""Kafka's ClientQuotaManager for one quota type (produce bytes, fetch bytes, request time).

Sans-IO: the caller passes the time, so windows and throttle times are tested with
a fake clock. A client is (user, client-id); the quota that binds it is the first
configured entity in Kafka's precedence order, and every client that resolves to
the same metric tags shares one rate sensor (e.g. a `/users/<default>` quota gives
each user one sensor for all its client ids). A sensor is a `QuotaRate` (Kafka's Rate) over
`quota.window.num` windows of `quota.window.size.seconds`; recording past the bound
yields the throttle time that brings the rate back to it (QuotaUtils.throttleTime).
Sensors unused for an hour are dropped, as Kafka expires them.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator

import attrs

from broker.quotas.client_quota_entity import ClientQuotaEntity, MetricTags, precedence
from broker.quotas.quota_rate import QuotaRate

Clock = Callable[[], float]
INACTIVE_SENSOR_EXPIRATION_S = 3600.0


@attrs.frozen
class QuotaBinding:
    """Which sensor a client records into, and its bound (None: unlimited)."""

    tags: MetricTags
    bound: float | None


class _ThrottleStats:
    """Avg and max of throttle times over the quota windows, for the throttle-time metric."""

    __slots__ = ("_span_s", "_values")

    def __init__(self, span_s: float) -> None:
        self._span_s = span_s
        self._values: deque[tuple[float, float]] = deque()

    def record(self, value: float, now: float) -> None:
        self._values.append((now, value))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._values and now - self._values[0][0] >= self._span_s:
            self._values.popleft()

    def avg_max(self, now: float) -> tuple[float, float]:
        self._trim(now)
        if not self._values:
            return 0.0, 0.0
        values = [v for _, v in self._values]
        return math.fsum(values) / len(values), max(values)


class ClientSensors:
    """The rate sensor and throttle-time statistics of one set of metric tags."""

    __slots__ = ("last_used", "rate", "throttle")

    def __init__(self, window_s: float, samples: int, now: float) -> None:
        self.rate = QuotaRate(window_s, samples)
        self.throttle = _ThrottleStats(window_s * samples)
        self.last_used = now


class ClientQuotaManager:
    """Quotas and sensors for one quota key (e.g. `producer_byte_rate`)."""

    def __init__(
        self,
        quota_key: str,
        window_s: float,
        samples: int,
        *,
        max_throttle_ms: float | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.quota_key = quota_key
        self.window_s = window_s
        self.samples = samples
        self._max_throttle_ms = max_throttle_ms
        self._clock = clock
        self._quotas: dict[ClientQuotaEntity, float] = {}
        self._bindings: dict[tuple[str, str], QuotaBinding] = {}
        self._sensors: dict[MetricTags, ClientSensors] = {}
        self._next_expiry_check = 0.0

    # ---- configuration

    @property
    def enabled(self) -> bool:
        """Whether any quota of this type is configured; when not, nothing is recorded."""
        return bool(self._quotas)

    def update_quota(self, entity: ClientQuotaEntity, bound: float | None) -> None:
        """Set or (None) remove the quota of an entity; bindings are resolved again."""
        if bound is None:
            self._quotas.pop(entity, None)
        else:
            self._quotas[entity] = bound
        self._bindings.clear()

    def binding(self, user: str, client_id: str) -> QuotaBinding:
        key = (user, client_id)
        found = self._bindings.get(key)
        if found is None:
            found = QuotaBinding(MetricTags("", client_id), None)
            for entity, tags in precedence(user, client_id):
                bound = self._quotas.get(entity)
                if bound is not None:
                    found = QuotaBinding(tags, bound)
                    break
            if len(self._bindings) > 100_000:
                self._bindings.clear()
            self._bindings[key] = found
        return found

    def quota_limit(self, user: str, client_id: str) -> float | None:
        return self.binding(user, client_id).bound

    # ---- recording

    def _sensors_for(self, tags: MetricTags, now: float) -> ClientSensors:
        sensors = self._sensors.get(tags)
        if sensors is None:
            sensors = ClientSensors(self.window_s, self.samples, now)
            self._sensors[tags] = sensors
        sensors.last_used = now
        if now >= self._next_expiry_check:
            self._expire(now)
        return sensors

    def _expire(self, now: float) -> None:
        self._next_expiry_check = now + 60.0
        for tags, sensors in list(self._sensors.items()):
            if now - sensors.last_used >= INACTIVE_SENSOR_EXPIRATION_S:
                del self._sensors[tags]

    def record_and_get_throttle_ms(
        self, user: str, client_id: str, value: float, now: float | None = None
    ) -> int:
        """Record `value`; the throttle time in ms if the client's rate is now above its
        quota, else 0. Nothing is recorded while no quota of this type exists."""
        if not self._quotas:
            return 0
        t = self._clock() if now is None else now
        binding = self.binding(user, client_id)
        sensors = self._sensors_for(binding.tags, t)
        sensors.rate.record(value, t)
        if binding.bound is None:
            return 0
        throttle_s = sensors.rate.throttle_time(binding.bound, t)
        if throttle_s <= 0:
            return 0
        throttle_ms = throttle_s * 1000.0
        if self._max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self._max_throttle_ms)
        return max(round(throttle_ms), 1)

    def record_no_throttle(
        self, user: str, client_id: str, value: float, now: float | None = None
    ) -> None:
        """Count `value` towards later throttles without throttling now (Kafka's
        recordNoThrottle, used for network-thread time)."""
        if not self._quotas:
            return
        t = self._clock() if now is None else now
        self._sensors_for(self.binding(user, client_id).tags, t).rate.record(value, t)

    def unrecord(self, user: str, client_id: str, value: float, now: float | None = None) -> None:
        """Take back a recorded value (a throttled fetch whose data is not sent)."""
        if not self._quotas:
            return
        t = self._clock() if now is None else now
        self._sensors_for(self.binding(user, client_id).tags, t).rate.unrecord(value, t)

    def record_throttle_time(
        self, user: str, client_id: str, throttle_ms: float, now: float | None = None
    ) -> None:
        """The throttle applied to the client's channel, for the throttle-time metric."""
        if not self._quotas:
            return
        t = self._clock() if now is None else now
        self._sensors_for(self.binding(user, client_id).tags, t).throttle.record(throttle_ms, t)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most one request may take without exceeding the quota over the measured
        span (bound x (samples - 1) windows): Kafka caps fetch sizes by it."""
        bound = self.quota_limit(user, client_id) if self._quotas else None
        if bound is None:
            return math.inf
        return bound * max(self.samples - 1, 1) * self.window_s

    # ---- metrics

    def rate(self, tags: MetricTags, now: float | None = None) -> float:
        sensors = self._sensors.get(tags)
        if sensors is None:
            return 0.0
        return sensors.rate.measure(self._clock() if now is None else now)

    def sensors(self, now: float | None = None) -> Iterator[tuple[MetricTags, float, float, float]]:
        """(tags, rate, throttle-time avg, throttle-time max) of every live sensor."""
        t = self._clock() if now is None else now
        for tags, sensors in list(self._sensors.items()):
            avg, top = sensors.throttle.avg_max(t)
            yield tags, sensors.rate.measure(t), avg, top
