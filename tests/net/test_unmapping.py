"""Large frames' mappings given up are unmapped off the event loop."""

from __future__ import annotations

import mmap
import threading

import pytest

from broker.net import unmapping
from broker.net.unmapping import unmap_in_worker_thread
from broker.protocol.frame_buffers import anonymous_mapping
from tests.waiting import wait_until


async def test_a_mapping_given_up_is_unmapped_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed_in: list[threading.Thread] = []
    close = unmapping.close_mapping

    def close_and_note(mapping: mmap.mmap) -> None:
        closed_in.append(threading.current_thread())
        close(mapping)

    monkeypatch.setattr(unmapping, "close_mapping", close_and_note)
    mapping = anonymous_mapping(1 << 20)
    mapping[:4] = b"used"
    unmap_in_worker_thread(mapping)
    assert not mapping.closed  # not on the loop
    await wait_until(lambda: mapping.closed)
    assert closed_in and closed_in[0] is not threading.main_thread()


def test_outside_a_trio_run_a_mapping_given_up_is_unmapped_at_once() -> None:
    mapping = anonymous_mapping(1 << 20)
    unmap_in_worker_thread(mapping)
    assert mapping.closed


def test_a_mapping_something_still_views_is_left_to_its_last_reference() -> None:
    mapping = anonymous_mapping(1 << 20)
    view = memoryview(mapping)
    unmapping.close_mapping(mapping)  # no BufferError
    assert not mapping.closed and len(view) == 1 << 20
