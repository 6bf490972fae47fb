"""Per-API request metrics and the request log, recorded when a response completes.

Kafka derives every latency from timestamps stamped along the way
(RequestChannel.Request.updateRequestMetrics); so do we, once, at the end,
rather than timing each stage separately. The request log is Kafka's
`kafka.request.logger` at DEBUG: one JSON line per completed request.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import attrs

from broker.metrics import Histogram, Meter, MetricsRegistry
from broker.net.request import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    SendResponse,
)
from broker.protocol.api import API_NAMES
from broker.protocol.json_view import to_jsonable

request_logger = logging.getLogger("kafka.request.logger")

_NS_PER_MS = 1_000_000


# Requests whose timings are held back before they reach the histograms in one batch.
_BATCH = 64
# The order of the values of one request in `_ApiMetrics.pending`.
_HISTOGRAMS = (
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ThrottleTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
    "TotalTimeMs",
    "RequestBytes",
)


@attrs.frozen
class _ApiMetrics:
    requests: dict[int, Meter]
    histograms: tuple[Histogram, ...]  # in _HISTOGRAMS order
    pending: list[tuple[float, ...]] = attrs.field(factory=list)

    def flush(self) -> None:
        """Hand the held-back values to the histograms, column by column."""
        pending = self.pending
        taken = len(pending)
        if not taken:
            return
        columns = list(zip(*pending[:taken], strict=True))
        del pending[:taken]  # only what was taken, should a reader run in another thread
        for histogram, values in zip(self.histograms, columns, strict=True):
            histogram.update_many(values)


class RequestMetrics:
    """Caches the metric objects per API so the hot path does no registry lookups.

    A request's eight histogram values are kept as one tuple and handed over every
    `_BATCH` requests (eight update calls per request cost more than the rest of the
    accounting); every read of those histograms flushes first, so none is ever stale.
    """

    def __init__(self, registry: MetricsRegistry) -> None:
        self._registry = registry
        self._by_api: dict[int, _ApiMetrics] = {}

    def _for_api(self, api_key: int) -> _ApiMetrics:
        metrics = self._by_api.get(api_key)
        if metrics is None:
            name = API_NAMES.get(api_key, str(api_key))

            metrics = _ApiMetrics(
                requests={},
                histograms=tuple(
                    self._registry.histogram(
                        "kafka.network", "RequestMetrics", metric, request=name
                    )
                    for metric in _HISTOGRAMS
                ),
            )
            for histogram in metrics.histograms:
                histogram.add_pending_source(metrics.flush)
            self._by_api[api_key] = metrics
        return metrics

    def _requests_meter(self, metrics: _ApiMetrics, api_key: int, version: int) -> Meter:
        meter = metrics.requests.get(version)
        if meter is None:
            meter = self._registry.meter(
                "kafka.network",
                "RequestMetrics",
                "RequestsPerSec",
                request=API_NAMES.get(api_key, str(api_key)),
                version=str(version),
            )
            metrics.requests[version] = meter
        return meter

    def record(
        self, request: Request, response: SendResponse | NoOpResponse | CloseConnectionResponse
    ) -> None:
        end = time.perf_counter_ns()
        metrics = self._by_api.get(request.api_key) or self._for_api(request.api_key)
        meter = metrics.requests.get(request.api_version) or self._requests_meter(
            metrics, request.api_key, request.api_version
        )
        meter.mark()
        start = request.start_ns
        dequeue = request.dequeue_ns or start
        local_complete = request.api_local_complete_ns or dequeue
        response_complete = request.response_complete_ns or local_complete
        response_dequeue = request.response_dequeue_ns or response_complete
        pending = metrics.pending
        pending.append(
            (
                (dequeue - start) / _NS_PER_MS,
                (local_complete - dequeue) / _NS_PER_MS,
                (response_complete - local_complete) / _NS_PER_MS,
                request.throttle_ms,
                (response_dequeue - response_complete) / _NS_PER_MS,
                (end - response_dequeue) / _NS_PER_MS,
                (end - start) / _NS_PER_MS,
                request.size_bytes,
            )
        )
        if len(pending) >= _BATCH:
            metrics.flush()
        if request_logger.isEnabledFor(logging.DEBUG):
            timings = {
                "requestQueueTimeMs": (dequeue - start) / _NS_PER_MS,
                "localTimeMs": (local_complete - dequeue) / _NS_PER_MS,
                "remoteTimeMs": (response_complete - local_complete) / _NS_PER_MS,
                "throttleTimeMs": float(request.throttle_ms),
                "responseQueueTimeMs": (response_dequeue - response_complete) / _NS_PER_MS,
                "sendTimeMs": (end - response_dequeue) / _NS_PER_MS,
                "totalTimeMs": (end - start) / _NS_PER_MS,
            }
            log_body = response.log_body if isinstance(response, SendResponse) else None
            request_logger.debug(
                "Completed request:%s", _request_log_line(request, log_body, timings)
            )


def _request_log_line(request: Request, response_body: Any, timings: dict[str, float]) -> str:
    header = request.header
    context = request.context
    entry: dict[str, Any] = {
        "isForwarded": False,
        "requestHeader": {
            "requestApiKey": header.api_key,
            "requestApiVersion": header.api_version,
            "correlationId": header.correlation_id,
            "clientId": header.client_id,
            "requestApiKeyName": API_NAMES.get(header.api_key, "UNKNOWN"),
        },
        "request": to_log_json(request.body),
        "response": to_log_json(response_body),
        "connection": context.connection_id,
        **{key: round(value, 3) for key, value in timings.items()},
        "securityProtocol": context.security_protocol,
        "principal": context.principal,
        "listener": context.listener_name,
        "clientInformation": {
            "softwareName": context.client_information.software_name,
            "softwareVersion": context.client_information.software_version,
        },
    }
    return json.dumps(entry, separators=(",", ":"), default=str)


def to_log_json(value: Any) -> Any:
    """A message as JSON-able data; record payloads are replaced by their sizes."""
    return to_jsonable(value, lambda data: {"sizeInBytes": len(data)})
