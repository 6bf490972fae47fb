"""The replication table of `make bench` (bench/bench_replication.py) in its quick mode:
three `broker serve` hosts on 127.0.0.2-4 and a ZooKeeper the benchmark starts, one
slice of each replication factor, one host restarted, one kill -9 (3 s session), so
that issue 20's rows keep coming out with their columns. Processes: marked slow
(tests/conftest.py).
"""

from __future__ import annotations

import math

from bench import bench_replication

COLUMNS = {
    "measurement",
    "measured",
    "unit",
    "baseline (same run)",
    "baseline is",
    "measured/baseline",
    "goal",
    "goal met",
    "spread (min / median / max) or per host",
    "samples",
    "notes",
}


def test_the_replication_table_quick_mode_gives_every_issue_20_row_its_columns() -> None:
    rows = bench_replication.run(0.5, quick=True)
    assert [row["measurement"].split(":")[0] for row in rows] == [
        "produce 1024 B values, 2 producers, acks=all, 3 partitions (one led per host)",
        "produce 1024 B values, 2 producers at nice 19, acks=all, 3 partitions (one led per host)",
        "rolling restart (SIGTERM",
        "kill -9 of a leader's host until its partitions' producers are acknowledged again",
        "kill -9 of a leader's host until its partitions' producers are acknowledged again",
    ]
    for row in rows:
        assert set(row) == COLUMNS, row
        assert row["goal met"] in ("yes", "NO"), row
        assert math.isfinite(row["measured"]) and row["measured"] > 0, row
        assert row["baseline (same run)"] > 0, row
    throughput, brokers_first, restart, p50, p99 = rows
    for row in (throughput, brokers_first):
        assert row["unit"] == "msgs/s" and "µs" in row["notes"]
    assert "host 1: " in restart["spread (min / median / max) or per host"]
    assert "0 records failed" in restart["notes"]
    assert p50["baseline (same run)"] == 3.0  # the quick mode's session timeout, in s
    assert p50["measured"] <= p99["measured"]
