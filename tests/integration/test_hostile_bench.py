"""The hostile-load table of `make bench` (bench/bench_hostile.py) in its quick mode: one
short run of the issue 22 rows (pool-sized frames, hostile frames, wrong SCRAM passwords)
with a few connections and a small pool, so that the table keeps working. `broker serve`
processes and an attacker process: marked slow (tests/conftest.py).
"""

from __future__ import annotations

import math

import pytest

from bench import bench_hostile


def test_the_hostile_table_quick_mode_gives_every_issue_22_row_its_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The attacker at normal priority: at idle priority on the busy CI machine it may get
    # no CPU at all in the half second (no frame sent), and the columns are what is checked.
    monkeypatch.setenv("BENCH_ATTACKER", "normal")
    rows = {row["attack"]: row for row in bench_hostile.run(0.5, quick=True, only=_ISSUE_22)}
    assert len(rows) == len(_ISSUE_22)
    for name, row in rows.items():
        assert row["records acked"] > 0, name
        assert row["records lost"] == 0, name
        assert row["p99 ratio"] > 0, name
        assert row["attack units"] > 0, name
        assert row["broker cpu s per run (mean)"] > 0, name
        assert math.isfinite(float(row["broker cpu us / attack unit"])), name
        newcomers = row["new client first answer ms (before p50 / during p50 / during max)"]
        assert all(float(ms) < 5000 for ms in newcomers.split(" / ")), (name, newcomers)
    frames = rows["hostile frames, one per connection, as fast as answered"]
    left = frames["sockets left after the attack, each run (total / CLOSE_WAIT)"]
    assert left == "0/0", "a peer's close must close the broker's side (issue 22 item 5)"
    flood = rows["4 conns pipelining pool-sized frames, pool 4 MB"]
    assert flood["rss growth / pool"] < 3, flood
    logins = rows["1000 wrong SCRAM passwords/s (units: failed logins)"]
    assert "SCRAM login p99 ms (before / during)" in logins
    assert logins["broker log lines during attack (most in a run)"] < 100, logins


_ISSUE_22 = frozenset({"pool-sized", "frames", "wrong-passwords"})
