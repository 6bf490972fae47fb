"""Does an open console slow the broker? Produce throughput with a console page
refreshing (the overview and topics JSON every 2 s, as the open pages fetch them, plus
/metrics) against the same broker load with no page open, side by side, alternating
and keeping the best run of each (a neighbour's burst must not decide it)."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.bench_authorizer import produce_template
from bench.bench_network import load
from bench.servers import our_broker

PAGE_REFRESH_S = 2.0
_SERVING = re.compile(r"serving metrics and the web console on http://[^:]+:(\d+)/")


def _console_port(log: Path) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = _SERVING.search(log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise RuntimeError("the console did not start")


async def _load_with_page(port: int, http_port: int | None, duration_s: float) -> float:
    template = produce_template()
    result: dict[str, float] = {}
    async with trio.open_nursery() as nursery:
        if http_port is not None:

            async def page() -> None:
                base = f"http://127.0.0.1:{http_port}"
                async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                    while True:
                        for path in ("/console/api/overview", "/console/api/topics", "/metrics"):
                            (await http.get(path)).raise_for_status()
                        await trio.sleep(PAGE_REFRESH_S)

            nursery.start_soon(page)
        result = await load(port, template, 16, 4, duration_s)
        nursery.cancel_scope.cancel()
    return result["req_per_s"]


def produce_rate(duration_s: float, work: Path, page_open: bool) -> float:
    with our_broker(work, {"metrics.port": "0"}) as bootstrap:
        port = int(bootstrap.rsplit(":", 1)[1])
        http_port = _console_port(work / "broker.log")
        trio.run(load, port, produce_template(), 4, 1, 0.3)  # creates the topic, warms up
        return trio.run(_load_with_page, port, http_port if page_open else None, duration_s)


def run(duration_s: float = 4.0) -> list[dict[str, Any]]:
    best = {False: 0.0, True: 0.0}
    for page_open in (False, True, True, False):
        with tempfile.TemporaryDirectory() as work:
            rate = produce_rate(duration_s, Path(work), page_open)
            best[page_open] = max(best[page_open], rate)
    return [
        {
            "benchmark": "broker Produce v9, 10 records of 100 B, acks=1, 16 conns x 4 pipelined",
            "no console page req/s": round(best[False]),
            "console page refreshing req/s": round(best[True]),
            "with/without": round(best[True] / best[False], 2),
        }
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
