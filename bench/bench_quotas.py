"""The cost of client-quota accounting on the produce path: quotas off against quotas on
with limits no client reaches, side by side.

The micro benchmark times QuotaManagers.on_response for a Produce response (what
KafkaApis adds per response); the broker benchmark runs the same pipelined
Produce load against a broker without quotas and one whose stored quotas give the
benchmark's client id (`bench`) producer_byte_rate and request_percentage limits
far above the load, so every request is recorded and checked but never throttled.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.bench_authorizer import produce_template
from bench.bench_network import load
from bench.servers import our_broker
from broker.net.request import ClientInformation, Request, RequestContext
from broker.protocol.api import RequestHeader
from broker.protocol.messages import ProduceResponse
from broker.quotas.client_quota_entity import client_entity
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore

HIGH_LIMITS = {"producer_byte_rate": 1e12, "request_percentage": 1e6}


def _request() -> Request:
    request = Request(
        header=RequestHeader(api_key=0, api_version=9, correlation_id=1, client_id="bench"),
        body=None,
        context=RequestContext(
            "c", 0, "PLAINTEXT", "PLAINTEXT", "127.0.0.1", 1, ClientInformation()
        ),
        size_bytes=1200,
    )
    request.dequeue_ns = time.perf_counter_ns()
    request.api_local_complete_ns = request.dequeue_ns + 50_000
    return request


def _calls_per_second(quotas: QuotaManagers, duration_s: float) -> float:
    request = _request()
    response = ProduceResponse()
    calls = 0
    started = time.perf_counter()
    deadline = started + duration_s
    while time.perf_counter() < deadline:
        for _ in range(200):
            quotas.on_response(request, response, len)
        calls += 200
    return calls / (time.perf_counter() - started)


def micro(duration_s: float) -> dict[str, Any]:
    off = QuotaManagers(1.0, 11)
    on = QuotaManagers(1.0, 11)
    on.set_quotas(client_entity("bench"), HIGH_LIMITS)
    off_rate = _calls_per_second(off, duration_s)
    on_rate = _calls_per_second(on, duration_s)
    return {
        "benchmark": "QuotaManagers.on_response, Produce",
        "quotas off µs/response": round(1e6 / off_rate, 2),
        "quotas on µs/response": round(1e6 / on_rate, 2),
        "on/off": round(off_rate / on_rate, 2),
    }


def produce_rate(duration_s: float, work: Path, quotas_on: bool) -> float:
    if quotas_on:
        (work / "data").mkdir(parents=True)
        QuotaStore(work / "data").save_sync([(client_entity("bench"), HIGH_LIMITS)])
    with our_broker(work) as bootstrap:
        port = int(bootstrap.rsplit(":", 1)[1])
        template = produce_template()
        trio.run(load, port, template, 4, 1, 0.3)  # auto-creates the topic, warms up
        return float(trio.run(load, port, template, 16, 4, duration_s)["req_per_s"])


def run(duration_s: float = 3.0) -> list[dict[str, Any]]:
    rows = [micro(min(duration_s, 1.0))]
    # Off and on alternate, three times each, and the best run of each counts: on a
    # shared machine a neighbour's burst would otherwise decide the comparison.
    best = {False: 0.0, True: 0.0}
    for quotas_on in (False, True, True, False, False, True):
        with tempfile.TemporaryDirectory() as work:
            best[quotas_on] = max(best[quotas_on], produce_rate(duration_s, Path(work), quotas_on))
    rows.append(
        {
            "benchmark": "broker Produce v9, 10 records of 100 B, acks=1, 16 conns x 4 pipelined",
            "quotas off req/s": round(best[False]),
            "quotas on (never reached) req/s": round(best[True]),
            "on/off": round(best[True] / best[False], 2),
        }
    )
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
