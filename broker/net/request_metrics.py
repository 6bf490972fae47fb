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


@attrs.frozen
class _ApiMetrics:
    requests: dict[int, Meter]
    queue_time: Histogram
    local_time: Histogram
    remote_time: Histogram
    throttle_time: Histogram
    response_queue_time: Histogram
    response_send_time: Histogram
    total_time: Histogram
    request_bytes: Histogram


class RequestMetrics:
    """Caches the metric objects per API so the hot path does no registry lookups."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self._registry = registry
        self._by_api: dict[int, _ApiMetrics] = {}

    def _for_api(self, api_key: int) -> _ApiMetrics:
        metrics = self._by_api.get(api_key)
        if metrics is None:
            name = API_NAMES.get(api_key, str(api_key))

            def histogram(metric: str) -> Histogram:
                return self._registry.histogram(
                    "kafka.network", "RequestMetrics", metric, request=name
                )

            metrics = _ApiMetrics(
                requests={},
                queue_time=histogram("RequestQueueTimeMs"),
                local_time=histogram("LocalTimeMs"),
                remote_time=histogram("RemoteTimeMs"),
                throttle_time=histogram("ThrottleTimeMs"),
                response_queue_time=histogram("ResponseQueueTimeMs"),
                response_send_time=histogram("ResponseSendTimeMs"),
                total_time=histogram("TotalTimeMs"),
                request_bytes=histogram("RequestBytes"),
            )
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
        metrics.queue_time.update((dequeue - start) / _NS_PER_MS)
        metrics.local_time.update((local_complete - dequeue) / _NS_PER_MS)
        metrics.remote_time.update((response_complete - local_complete) / _NS_PER_MS)
        metrics.throttle_time.update(request.throttle_ms)
        metrics.response_queue_time.update((response_dequeue - response_complete) / _NS_PER_MS)
        metrics.response_send_time.update((end - response_dequeue) / _NS_PER_MS)
        metrics.total_time.update((end - start) / _NS_PER_MS)
        metrics.request_bytes.update(request.size_bytes)
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
