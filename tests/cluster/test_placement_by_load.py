"""New partition leaders go to the least loaded process, count and rotation breaking ties."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import trio
from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.metadata_store import SqliteMetadataStore
from broker.cluster.placement import spread_leaders
from broker.cluster.placement_by_load import (
    LOAD_MARGIN_FLOOR,
    LOAD_MARGIN_FRACTION,
    NodeLoad,
    place_leaders,
)
from broker.cluster.placement_load_report import BytesInWindow, LoadReporter
from broker.metrics import Meter

node_ids = st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=8, unique=True)
rates = st.floats(min_value=0, max_value=1e9, allow_nan=False)


@st.composite
def cluster_loads(draw: st.DrawFn) -> list[NodeLoad]:
    nodes = draw(node_ids)
    return [NodeLoad(n, draw(rates), draw(st.integers(min_value=0, max_value=50))) for n in nodes]


@given(node_ids, st.integers(min_value=0, max_value=200), st.integers(min_value=1, max_value=40))
def test_an_idle_cluster_places_exactly_as_the_round_robin_rule(
    nodes: list[int], existing: int, count: int
) -> None:
    # The existing partitions were placed by the rotation too, as they are from a fresh store.
    held = Counter(spread_leaders(nodes, existing, 0)) if existing else Counter[int]()
    idle = [NodeLoad(n, 0.0, held[n]) for n in nodes]
    assert place_leaders(idle, count, existing) == spread_leaders(nodes, count, existing)


@given(cluster_loads(), st.integers(min_value=0, max_value=1000))
def test_the_first_new_leader_is_a_process_within_the_margin_of_the_least_load(
    loads: list[NodeLoad], start: int
) -> None:
    (leader,) = place_leaders(loads, 1, start)
    least = min(n.bytes_in_per_s for n in loads)
    margin = max(LOAD_MARGIN_FLOOR, LOAD_MARGIN_FRACTION * least)
    chosen = next(n for n in loads if n.node == leader)
    assert chosen.bytes_in_per_s <= least + margin
    # Among those, it leads the fewest partitions.
    assert chosen.leaders == min(n.leaders for n in loads if n.bytes_in_per_s <= least + margin)


@given(
    cluster_loads(), st.integers(min_value=1, max_value=30), st.integers(min_value=0, max_value=99)
)
def test_placement_names_only_known_processes_and_ignores_their_order(
    loads: list[NodeLoad], count: int, start: int
) -> None:
    placed = place_leaders(loads, count, start)
    assert len(placed) == count
    assert set(placed) <= {n.node for n in loads}
    assert place_leaders(list(reversed(loads)), count, start) == placed


@given(
    st.integers(min_value=2, max_value=8),
    st.floats(min_value=2 * LOAD_MARGIN_FLOOR, max_value=1e9),
    st.integers(min_value=1, max_value=7),
)
def test_a_hot_process_gets_none_of_a_new_topics_partitions_while_the_others_can_take_them(
    processes: int, hot_rate: float, wanted: int
) -> None:
    # One partition per process; the first carries all the load.
    loads = [NodeLoad(1, hot_rate, 1)] + [NodeLoad(n, 0.0, 1) for n in range(2, processes + 1)]
    count = min(wanted, processes - 1)
    placed = place_leaders(loads, count, 0)
    assert 1 not in placed
    # Each placed partition adds to its process's load: they spread over the idle ones.
    assert len(set(placed)) == count


@given(
    cluster_loads(), st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=99)
)
def test_one_topics_partitions_are_shared_out_as_evenly_as_by_count(
    loads: list[NodeLoad], count: int, start: int
) -> None:
    placed = Counter(place_leaders(loads, count, start))
    base, extra = divmod(count, len(loads))
    # As evenly as by count: `base` each, and `extra` processes one more.
    assert sorted((placed[n.node] for n in loads), reverse=True) == (
        [base + 1] * extra + [base] * (len(loads) - extra)
    )


def test_a_wide_topic_after_a_busy_one_spreads_over_every_process() -> None:
    # Half of 8 processes were busy with the last topic; the mean load per partition,
    # over many idle partitions, is small beside theirs.
    loads = [NodeLoad(n, 200e6 if n <= 4 else 0.0, 40) for n in range(1, 9)]
    placed = Counter(place_leaders(loads, 16, 320))
    assert placed == {n: 2 for n in range(1, 9)}
    # Narrower than the cluster, it still goes to the idle half only.
    assert set(place_leaders(loads, 4, 320)) == {5, 6, 7, 8}


def test_a_window_measures_bytes_per_second_over_its_length_only() -> None:
    window = BytesInWindow(10.0)
    assert window.record(0.0, 0) == 0.0
    assert window.record(5.0, 5_000) == 1_000.0
    assert window.record(10.0, 10_000) == 1_000.0
    # Quiet for a whole window: the burst falls out of it.
    assert window.record(20.0, 10_000) == 0.0
    assert window.record(25.0, 30_000) == 20_000 / 15


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.01, max_value=5), st.integers(min_value=0, max_value=10**6)
        ),
        min_size=1,
        max_size=50,
    )
)
def test_a_windows_rate_is_never_negative_nor_above_the_bytes_seen(
    steps: list[tuple[float, int]],
) -> None:
    window = BytesInWindow(3.0)
    now, total = 0.0, 0
    window.record(now, total)
    for gap, added in steps:
        now, total = now + gap, total + added
        rate = window.record(now, total)
        assert 0 <= rate <= total / min(gap, now) + 1e-6


def test_the_store_places_a_new_topic_away_from_the_process_reporting_load(
    tmp_path: Path,
) -> None:
    store = SqliteMetadataStore(tmp_path)
    try:
        store.prepare_nodes([1, 2, 3])
        store.create_topic("hot", uuid.uuid4(), 3, {})
        store.report_load(1, 50e6)
        store.report_load(2, 0.0)
        version = store.version()
        store.report_load(3, 1e3)
        assert store.version() == version  # a report changes no process's view
        store.create_topic("new", uuid.uuid4(), 2, {})
        assert sorted(store.read_image().topics["new"].leaders) == [2, 3]
        # Wider than the cluster, a topic has a leader on every process, the loaded one
        # too, but that one takes no more than its share: the one left over goes to an
        # idle process.
        store.create_topic("wide", uuid.uuid4(), 4, {})
        leaders = store.read_image().topics["wide"].leaders
        assert Counter(leaders)[1] == 1
        assert sorted(leaders) in ([1, 2, 2, 3], [1, 2, 3, 3])
        # A restart of the cluster forgets the old loads: the count alone places again.
        # Process 1 leads the fewest partitions (2, the others 3 or 4) and takes the first;
        # the second goes elsewhere, as a topic's partitions spread over the processes.
        store.prepare_nodes([1, 2, 3])
        store.create_topic("after", uuid.uuid4(), 2, {})
        first, second = store.read_image().topics["after"].leaders
        assert first == 1 and second in (2, 3)
    finally:
        store.close()


class RecordingStore:
    def __init__(self) -> None:
        self.reports: list[tuple[int, float]] = []

    def report_load(self, node_id: int, bytes_in_per_s: float) -> None:
        self.reports.append((node_id, bytes_in_per_s))


async def test_a_process_reports_its_bytes_in_per_second_and_zero_once_a_window_is_quiet() -> None:
    store = RecordingStore()
    bytes_in = Meter()
    reporter = LoadReporter(store, 7, bytes_in, interval_s=0.02, window_s=0.2)
    async with trio.open_nursery() as nursery:
        await nursery.start(reporter.run)
        with trio.fail_after(10):
            for _ in range(1000):
                if any(rate > 0 for _, rate in store.reports):
                    break
                bytes_in.mark(3000)
                await trio.sleep(0.01)
            quiet_from = len(store.reports)
            # Silence for longer than the window: the reports fall back to nothing.
            for _ in range(200):
                if store.reports[quiet_from:] and store.reports[-1][1] == 0.0:
                    break
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert any(rate > 0 for _, rate in store.reports[:quiet_from])
    assert store.reports[quiet_from:] and store.reports[-1][1] == 0.0
    assert store.reports[0] == (7, 0.0)
    assert {node for node, _ in store.reports} == {7}
    assert all(rate >= 0 for _, rate in store.reports)
