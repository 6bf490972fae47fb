"""Unmapping large frames' mappings off the event loop.

`munmap` of a written 50 MB mapping takes 6-9 ms of CPU; on the event loop every other
connection waits for it (issue 22, point 1). `mmap.close` releases the GIL for it, so a
worker thread does it while the loop serves others.
"""

from __future__ import annotations

import contextlib
import mmap

import trio


def close_mapping(mapping: mmap.mmap) -> None:
    """munmap; a mapping something still views is left to its last reference."""
    with contextlib.suppress(BufferError):
        mapping.close()


def unmap_in_worker_thread(mapping: mmap.mmap) -> None:
    """Unmap `mapping` in a worker thread, from a system task of the current Trio run (at
    once outside one). The mapping's memory is already given back to the memory pool:
    the broker holds it a few milliseconds longer than the pool says."""
    try:
        trio.lowlevel.spawn_system_task(
            trio.to_thread.run_sync, close_mapping, mapping, name="unmap-frame"
        )
    except RuntimeError:  # no Trio run
        close_mapping(mapping)


__all__ = ["close_mapping", "unmap_in_worker_thread"]
