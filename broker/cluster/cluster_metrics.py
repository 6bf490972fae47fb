"""The supervisor's /metrics: every process's series, each labelled with its node.

Each process of a cluster serves its own registry on a private Unix socket in the
processes' socket directory (`metrics_socket`); the supervisor reads them all when it
is scraped, concurrently, and answers one exposition. A process that does not answer
(restarting) is `broker_process_up{node=..} 0` and has no other series meanwhile.

Consumer lag is joined here: the group's coordinator knows the committed offset, the
partition's leader its log end offset, and they may be two processes. Each process
reports `CommittedOffset` of all its groups' partitions and `LogEndOffset` of the
partitions it leads; `Lag` is computed from both for every partition of every group
(labelled with the coordinator's node), replacing what the processes computed alone.
On a host among hosts a partition may be led on another host: its end is asked of the
cluster (`cluster_log_ends.py`, ListOffsets through the Kafka API, bounded and cached),
so each host's supervisor reports the lag of every partition of the groups its
processes coordinate, and the hosts' /metrics together cover every group once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import trio
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from broker.cluster.cluster_log_ends import ClusterLogEnds

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 5.0
UP = "broker_process_up"
LOG_END = "kafka_log_log_logendoffset"
COMMITTED = "kafka_server_consumergrouplag_committedoffset"
LAG = "kafka_server_consumergrouplag_lag"


def metrics_socket(peer_dir: Path, node_id: int) -> Path:
    """Where process `node_id` serves its metrics for the supervisor."""
    return peer_dir / f"metrics-{node_id}.sock"


async def scrape_unix(path: Path) -> str | None:
    """GET /metrics over a Unix socket; None when nothing answers."""
    import httpx  # only the supervisor scrapes: the processes need not import it

    transport = httpx.AsyncHTTPTransport(uds=str(path))
    try:
        async with httpx.AsyncClient(transport=transport, timeout=SCRAPE_TIMEOUT_S) as client:
            response = await client.get("http://process/metrics")
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


class ClusterMetrics:
    """Metric families of all processes (see the module docstring)."""

    def __init__(
        self,
        nodes: Sequence[int],
        socket_of: Callable[[int], Path | None],
        cluster_ends: ClusterLogEnds | None = None,
    ) -> None:
        self._nodes = list(nodes)
        self._socket_of = socket_of
        self._cluster_ends = cluster_ends

    async def families(self) -> list[Metric]:
        texts: dict[int, str | None] = {}

        async def one(node: int) -> None:
            path = self._socket_of(node)
            texts[node] = None if path is None else await scrape_unix(path)

        async with trio.open_nursery() as nursery:
            for node in self._nodes:
                nursery.start_soon(one, node)
        return await join_families(texts, self._cluster_ends)


async def join_families(
    texts: dict[int, str | None], cluster_ends: ClusterLogEnds | None
) -> list[Metric]:
    """As `merge_process_families`, the lag of partitions none of these processes lead
    from the log ends `cluster_ends` asks of the cluster."""
    merged = merge_families(texts)
    remote: dict[tuple[str, int], int] = {}
    if cluster_ends is not None:
        remote = await cluster_ends.ends(_ends_missing(merged))
    merged[LAG] = _joined_lag(merged, remote)
    return list(merged.values())


def merge_process_families(texts: dict[int, str | None]) -> list[Metric]:
    """One family per name, the node as a label of each series, lag joined across nodes."""
    merged = merge_families(texts)
    merged[LAG] = _joined_lag(merged, {})
    return list(merged.values())


def merge_families(texts: dict[int, str | None]) -> dict[str, Metric]:
    """Every family but the lag, by name: each series labelled with its node."""
    merged: dict[str, Metric] = {}
    up = Metric(UP, "1 when the broker process answered this scrape", "gauge")
    for node in sorted(texts):
        text = texts[node]
        up.add_sample(UP, {"node": str(node)}, 0.0 if text is None else 1.0)
        if text is None:
            continue
        for family in text_string_to_metric_families(text):
            if family.name == LAG:
                continue
            out = merged.setdefault(
                family.name, Metric(family.name, family.documentation, family.type)
            )
            for sample in family.samples:
                labels = {**sample.labels, "node": sample.labels.get("node", str(node))}
                out.add_sample(sample.name, labels, sample.value)
    merged[UP] = up
    return merged


def _local_ends(merged: dict[str, Metric]) -> dict[tuple[str, int], float]:
    return {
        (s.labels["topic"], int(s.labels["partition"])): s.value
        for s in (merged[LOG_END].samples if LOG_END in merged else [])
    }


def _committed(merged: dict[str, Metric]) -> list[tuple[tuple[str, int], dict[str, str], float]]:
    return [
        ((s.labels["topic"], int(s.labels["partition"])), dict(s.labels), s.value)
        for s in (merged[COMMITTED].samples if COMMITTED in merged else [])
    ]


def _ends_missing(merged: dict[str, Metric]) -> set[tuple[str, int]]:
    """The partitions with a committed offset whose leader is none of these processes."""
    local = _local_ends(merged)
    return {key for key, _, _ in _committed(merged) if key not in local}


def _joined_lag(merged: dict[str, Metric], remote: Mapping[tuple[str, int], float]) -> Metric:
    """Lag from the processes' own log ends, else from those the cluster gave."""
    lag = Metric(LAG, "Kafka gauge kafka.server:type=ConsumerGroupLag,name=Lag", "gauge")
    ends = {**remote, **_local_ends(merged)}
    for key, labels, committed in _committed(merged):
        end = ends.get(key)
        if end is not None:
            lag.add_sample(LAG, labels, max(end - committed, 0.0))
    return lag
