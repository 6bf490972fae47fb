"""The swap of a coordinator's shard directories leaves the old layout or the new one,
wherever a crash cuts it short."""

from __future__ import annotations

import os
from pathlib import Path

from broker.cluster.shard_layout import ShardLayout


def layout_with(tmp_path: Path, shards: dict[int, str]) -> ShardLayout:
    layout = ShardLayout(tmp_path, "coordinator")
    for shard, content in shards.items():
        layout.shard_dir(shard).mkdir(parents=True)
        (layout.shard_dir(shard) / "state").write_text(content)
    return layout


def contents(layout: ShardLayout) -> dict[int, str]:
    return {shard: (d / "state").read_text() for shard, d in layout.shard_dirs().items()}


def stage(layout: ShardLayout, shards: dict[int, str]) -> None:
    for shard, content in shards.items():
        (layout.staging / f"shard-{shard}").mkdir(parents=True)
        (layout.staging / f"shard-{shard}" / "state").write_text(content)


def test_only_shard_directories_count_as_shards(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, {0: "a", 2: "c"})
    (layout.root / "shard-x").mkdir()
    (layout.root / "shard-1").write_text("a file, not a shard")
    assert contents(layout) == {0: "a", 2: "c"}
    assert ShardLayout(tmp_path, "absent").shard_dirs() == {}


def test_a_completed_swap_holds_the_new_layout_only(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, {0: "old-0"})
    stage(layout, {0: "new-0", 1: "new-1"})
    layout.swap_in_staged()
    layout.drop_old()
    assert contents(layout) == {0: "new-0", 1: "new-1"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["coordinator"]


def test_a_crash_while_staging_keeps_the_old_layout(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, {0: "old-0"})
    stage(layout, {0: "half"})
    layout.finish_interrupted()
    assert contents(layout) == {0: "old-0"}
    assert not layout.staging.exists()


def test_a_crash_between_the_two_renames_puts_the_old_layout_back(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, {0: "old-0"})
    stage(layout, {0: "new-0"})
    os.replace(layout.root, tmp_path / "coordinator.old")  # the first rename only
    layout.finish_interrupted()
    assert contents(layout) == {0: "old-0"}


def test_a_crash_after_the_swap_keeps_the_new_layout(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, {0: "old-0"})
    stage(layout, {0: "new-0"})
    layout.swap_in_staged()  # crash before drop_old
    layout.finish_interrupted()
    assert contents(layout) == {0: "new-0"}
    assert not (tmp_path / "coordinator.old").exists()
