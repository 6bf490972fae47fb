"""Per-process shard directories of a coordinator's state, and their crash-safe swap.

Group offsets and transaction state are kept by each process of a cluster in
`<name>/shard-<i>/` of the first log dir. When the process count changes, the supervisor
writes the new layout into `<name>.new/` and swaps it in through `<name>.old/`, so that a
crash at any point leaves the old layout or the new one: `finish_interrupted` completes
or rolls back a swap that a crash cut short before anything reads the shards.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs


@attrs.frozen
class ShardLayout:
    log_dir: Path
    name: str

    @property
    def root(self) -> Path:
        return self.log_dir / self.name

    @property
    def staging(self) -> Path:
        return self.log_dir / (self.name + ".new")

    @property
    def _old(self) -> Path:
        return self.log_dir / (self.name + ".old")

    def shard_dir(self, shard: int) -> Path:
        return self.root / f"shard-{shard}"

    def shard_dirs(self) -> dict[int, Path]:
        """The shard directories present, by shard index."""
        if not self.root.is_dir():
            return {}
        return {
            int(entry.name[6:]): entry
            for entry in self.root.iterdir()
            if entry.is_dir() and entry.name.startswith("shard-") and entry.name[6:].isdigit()
        }

    def finish_interrupted(self) -> None:
        """Drop a half-written staging directory; put back the old layout if a crash
        came between moving it aside and moving the new one in."""
        shutil.rmtree(self.staging, ignore_errors=True)
        if self._old.exists():
            if self.root.exists():
                shutil.rmtree(self._old, ignore_errors=True)
            else:
                os.replace(self._old, self.root)

    def swap_in_staged(self) -> None:
        """Make the staging directory the shards (two renames; see finish_interrupted)."""
        if self.root.exists():
            os.replace(self.root, self._old)
        os.replace(self.staging, self.root)

    def drop_old(self) -> None:
        """After the swap and the removal of what the old layout replaced."""
        shutil.rmtree(self._old, ignore_errors=True)
