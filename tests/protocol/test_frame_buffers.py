"""Large frames' buffers: reused once nothing references them, the idle ones bounded;
frames of 16 MiB and more too, given `keep_large` (the broker's)."""

from __future__ import annotations

import mmap
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.frame_buffers import (
    GRANULE,
    LARGE_FRAME,
    LARGE_SLACK,
    FrameBuffers,
    capacity_for,
)
from broker.protocol.framing import Frame, FrameDecoder

FRAME = 900 * 1024


def _read_frame(decoder: FrameDecoder, payload: bytes) -> Frame:
    """Feed a frame's prefix and first bytes, then read the rest into its own buffer."""
    wire = struct.pack(">i", len(payload)) + payload
    decoder.feed(wire[:1000])
    assert decoder.next_size() == len(payload)
    assert decoder.next_frame() is None
    position = 1000
    while (space := decoder.frame_space()) is not None and decoder.missing():
        count = len(space)
        space[:] = wire[position : position + count]
        del space
        decoder.advance(count)
        position += count
    frame = decoder.next_frame()
    assert frame is not None
    return frame


def test_a_large_frames_buffer_is_reused_only_once_nothing_references_it() -> None:
    buffers = FrameBuffers(keep_bytes=4 * capacity_for(FRAME))
    decoder = FrameDecoder(1 << 24, buffers)
    first = _read_frame(decoder, b"a" * FRAME)
    records = first[100:200]  # a decoded request keeps slices of its frame
    del first
    second = _read_frame(decoder, b"b" * FRAME)
    assert buffers.mapped == 2  # the first frame's slice still holds its buffer
    assert bytes(records) == b"a" * 100 and len(second) == FRAME
    del records, second
    third = _read_frame(decoder, bytes(range(256)) * (FRAME // 256))
    assert buffers.mapped == 2  # reused
    assert bytes(third) == bytes(range(256)) * (FRAME // 256)


def test_idle_buffers_beyond_the_kept_bytes_are_unmapped() -> None:
    buffers = FrameBuffers(keep_bytes=capacity_for(FRAME))
    frames = [_read_frame(FrameDecoder(1 << 24, buffers), b"x" * FRAME) for _ in range(5)]
    assert buffers.held_bytes == 5 * capacity_for(FRAME)
    frames.clear()
    buffers.sweep()
    assert buffers.idle_bytes == buffers.held_bytes == capacity_for(FRAME)


def test_small_frames_and_decoders_without_buffers_take_none() -> None:
    buffers = FrameBuffers()
    small = _read_frame(FrameDecoder(1 << 24, buffers), b"s" * 100_000)
    plain = _read_frame(FrameDecoder(1 << 24), b"p" * FRAME)
    assert bytes(small) == b"s" * 100_000 and bytes(plain) == b"p" * FRAME
    assert buffers.mapped == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(min_value=1, max_value=8 * GRANULE).map(lambda n: ("take", n)),
            st.integers(min_value=0, max_value=20).map(lambda i: ("drop", i)),
        ),
        max_size=40,
    ),
    st.integers(min_value=0, max_value=16 * GRANULE),
    st.integers(min_value=0, max_value=40 * GRANULE),
)
def test_idle_buffers_never_exceed_the_kept_bytes_nor_the_pools_free_memory(
    operations: list[tuple[str, int]], keep_bytes: int, pool_bytes: int
) -> None:
    live: list[tuple[int, memoryview]] = []  # a frame's view and its buffer's size
    admitted = [0]  # what the pool counts: admitted before the buffer is taken

    def room() -> int:
        return max(pool_bytes - admitted[0], 0)

    buffers = FrameBuffers(keep_bytes, room)
    for operation, value in operations:
        if operation == "take":
            admitted[0] += capacity_for(value)
            buffer = buffers.take(value)
            assert len(buffer) == capacity_for(value)
            live.append((len(buffer), memoryview(buffer)[:value]))
            del buffer
            assert buffers.held_bytes == admitted[0] + buffers.idle_bytes
            assert buffers.idle_bytes <= min(keep_bytes, room())
        elif live:
            capacity = live.pop(value % len(live))[0]
            admitted[0] -= capacity
    live.clear()
    admitted[0] = 0
    buffers.sweep()
    assert buffers.held_bytes == buffers.idle_bytes <= keep_bytes


LARGE = LARGE_FRAME + 3 * GRANULE


def test_a_large_frames_mapping_is_reused_given_keep_large_and_grown_for_a_larger_one() -> None:
    buffers = FrameBuffers(keep_bytes=0, keep_large=1)
    decoder = FrameDecoder(1 << 26, buffers)

    def mapping_of(frame: Frame) -> mmap.mmap:
        assert isinstance(frame, memoryview) and isinstance(frame.obj, mmap.mmap)
        return frame.obj

    first = _read_frame(decoder, b"a" * LARGE)
    mapping = id(mapping_of(first))  # not a reference: one would keep it from reuse
    del first
    second = _read_frame(decoder, b"b" * (LARGE - 1000))  # within a sixteenth: the same
    assert id(mapping_of(second)) == mapping and buffers.mapped == 1
    assert bytes(second[-3:]) == b"bbb" and len(second) == LARGE - 1000
    del second
    third = _read_frame(decoder, b"c" * (LARGE + GRANULE))  # larger: the same, grown
    assert id(mapping_of(third)) == mapping and len(mapping_of(third)) == LARGE + GRANULE
    assert bytes(third[-3:]) == b"ccc" and buffers.mapped == 1
    del third
    assert buffers.idle_large == 0
    buffers.sweep()
    assert buffers.idle_large == 1 and buffers.idle_bytes == LARGE + GRANULE


def test_a_large_frame_never_takes_a_much_larger_mapping() -> None:
    buffers = FrameBuffers(keep_bytes=0, keep_large=2)
    big = buffers.take(2 * LARGE)
    del big
    small = buffers.take(LARGE)
    assert len(small) == LARGE and buffers.mapped == 2
    assert buffers.idle_large == 1  # the larger one waits for a frame of its size


def test_large_frames_get_mappings_of_their_own_without_keep_large() -> None:
    buffers = FrameBuffers()
    decoder = FrameDecoder(1 << 26, buffers)
    first = _read_frame(decoder, b"a" * LARGE)
    del first
    second = _read_frame(decoder, b"b" * LARGE)
    assert len(second) == LARGE and buffers.mapped == 0 and buffers.held_bytes == 0


def test_idle_large_mappings_given_up_go_to_discard() -> None:
    discarded: list[int] = []
    buffers = FrameBuffers(
        keep_bytes=0, room=lambda: LARGE, keep_large=1, discard=lambda b: discarded.append(len(b))
    )
    frames = [buffers.take(LARGE), buffers.take(LARGE + GRANULE)]
    frames.clear()
    buffers.sweep()
    assert buffers.idle_large == 1 and discarded == [LARGE + GRANULE]  # the larger first
    taken = buffers.take(LARGE)  # reused
    assert len(taken) == LARGE and buffers.mapped == 2 and buffers.idle_large == 0


def test_idle_large_mappings_are_kept_only_while_a_large_frame_waits() -> None:
    waiting = [True]
    discarded: list[int] = []
    buffers = FrameBuffers(
        keep_large=2, discard=lambda b: discarded.append(len(b)), large_waiting=lambda: waiting[0]
    )
    frame = buffers.take(LARGE)
    del frame
    buffers.sweep()  # answered while the next frame waits: kept for it
    assert buffers.idle_large == 1 and not discarded
    waiting[0] = False
    taken = buffers.take(LARGE)  # the last one takes it
    assert buffers.mapped == 1
    del taken
    buffers.sweep()  # answered with none waiting: the flood is over
    assert buffers.idle_large == 0 and buffers.held_bytes == 0 and discarded == [LARGE]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(min_value=1, max_value=4 * GRANULE).map(lambda n: ("take", n)),
            st.integers(min_value=LARGE_FRAME, max_value=LARGE_FRAME + 40 * GRANULE).map(
                lambda n: ("take", n)
            ),
            st.integers(min_value=0, max_value=20).map(lambda i: ("drop", i)),
        ),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=8 * GRANULE),
    st.integers(min_value=0, max_value=3),
    st.integers(min_value=0, max_value=4 * LARGE_FRAME),
)
def test_idle_large_mappings_never_exceed_their_count_nor_the_pools_free_memory(
    operations: list[tuple[str, int]], keep_bytes: int, keep_large: int, pool_bytes: int
) -> None:
    live: list[tuple[int, memoryview]] = []  # what the pool counts for a frame, its view
    admitted = [0]  # what the pool counts: admitted before the buffer is taken

    def room() -> int:
        return pool_bytes - admitted[0]  # below 0 while overshot

    buffers = FrameBuffers(keep_bytes, room, keep_large)
    for operation, value in operations:
        if operation == "take":
            large = value >= LARGE_FRAME
            counted = value if large else capacity_for(value)
            admitted[0] += counted
            buffer = buffers.take(value)
            if large:  # of its size, or at most a sixteenth larger
                assert value <= len(buffer) <= value + value // LARGE_SLACK
            else:
                assert len(buffer) == counted
            live.append((counted, memoryview(buffer)[:value]))
            del buffer
        elif live:
            # Answered: the frame let go of, its mapping swept, then its bytes released.
            counted = live.pop(value % len(live))[0]
            buffers.sweep(freeing=counted)
            admitted[0] -= counted
        else:
            continue
        assert buffers.idle_bytes <= max(room(), 0) and buffers.idle_large <= keep_large
        assert buffers.idle_bytes - buffers.idle_large_bytes <= keep_bytes
    live.clear()
    admitted[0] = 0
    buffers.sweep()
    assert buffers.held_bytes == buffers.idle_bytes <= pool_bytes
    assert buffers.idle_large <= keep_large
