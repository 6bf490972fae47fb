"""Framing: what a connection buffers before and after the pool admits a frame."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol import framing
from broker.protocol.framing import READ_AHEAD, FrameDecoder, InvalidFrameSize


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_small_pipelined_frames_come_out_of_one_read_ahead() -> None:
    decoder = FrameDecoder(1000)
    decoder.feed(framed(b"one") + framed(b"") + framed(b"three"))
    assert [decoder.next_frame() for _ in range(4)] == [b"one", b"", b"three", None]
    assert decoder.buffered == 0
    assert decoder.read_size() == READ_AHEAD


def test_a_large_frame_is_never_read_past_its_end() -> None:
    payload = bytes(range(256)) * 200
    wire = framed(payload) + framed(b"next")
    decoder = FrameDecoder(len(payload))
    decoder.feed(wire[:READ_AHEAD])
    position = READ_AHEAD
    assert decoder.next_size() == len(payload)
    assert decoder.next_frame() is None
    while (frame := decoder.next_frame()) is None:
        want = decoder.read_size()
        assert position + want <= len(payload) + 4  # nothing of the next frame
        decoder.feed(wire[position : position + want])
        position += want
    assert bytes(frame) == payload
    decoder.feed(wire[position:])
    assert decoder.next_frame() == b"next"


def test_what_a_slow_sender_costs_is_what_it_sent() -> None:
    decoder = FrameDecoder(1 << 30)
    decoder.feed(struct.pack(">i", 1 << 30))
    assert decoder.next_frame() is None
    assert decoder.in_frame  # the prefix alone starts the frame's deadline
    decoder.feed(b"abcd")
    assert decoder.buffered == 4


@pytest.mark.parametrize("size", [-1, 1001, 2**31 - 1])
def test_sizes_outside_the_limit_are_rejected_from_the_prefix(size: int) -> None:
    decoder = FrameDecoder(1000)
    decoder.feed(struct.pack(">i", size))
    with pytest.raises(InvalidFrameSize):
        decoder.next_size()


@given(
    st.lists(st.binary(max_size=40000), min_size=1, max_size=6),
    st.integers(min_value=1, max_value=70000),
)
def test_any_split_of_the_stream_yields_the_same_frames(payloads: list[bytes], chunk: int) -> None:
    wire = b"".join(framed(p) for p in payloads)
    decoder = FrameDecoder(40000)
    out: list[bytes] = []
    position = 0
    while len(out) < len(payloads):
        frame = decoder.next_frame()
        if frame is not None:
            out.append(bytes(frame))
            continue
        data = wire[position : position + min(decoder.read_size(), chunk)]
        assert data, "the decoder asked for bytes past the last frame"
        decoder.feed(data)
        position += len(data)
    assert out == payloads
    assert position == len(wire)


def test_a_decoder_whose_frames_were_all_taken_holds_no_read_ahead() -> None:
    decoder = FrameDecoder(1 << 20)
    frames = [struct.pack(">i", n) + b"x" * n for n in (10, 300, 5000)]
    decoder.feed(b"".join(frames))
    assert decoder.held_bytes == sum(len(f) for f in frames)
    taken = [decoder.next_frame() for _ in frames]
    assert [len(t) for t in taken if t is not None] == [10, 300, 5000]
    assert decoder.held_bytes == 0


def test_a_decoder_keeps_only_the_bytes_of_a_frame_not_yet_whole() -> None:
    decoder = FrameDecoder(1 << 20)
    decoder.feed(struct.pack(">i", 4) + b"abcd" + struct.pack(">i", 100) + b"12")
    assert decoder.next_frame() == b"abcd"
    assert decoder.buffered == 6
    assert decoder.next_frame() is None
    assert decoder.held_bytes == 2  # moved to the frame's own buffer


@pytest.mark.parametrize("mapped", [False, True])
def test_a_large_frame_is_read_straight_into_a_buffer_of_its_size(
    mapped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mapped:  # as a frame above MAPPED_FRAME: a lazily paged mapping
        monkeypatch.setattr(framing, "MAPPED_FRAME", 1000)
    payload = bytes(range(256)) * 1000
    wire = framed(payload)
    decoder = FrameDecoder(len(payload))
    decoder.feed(wire[:100])
    assert decoder.next_size() == len(payload)
    assert decoder.next_frame() is None
    position = 100
    while (space := decoder.frame_space(7000)) is not None and decoder.missing():
        count = min(len(space), 5000)
        space[:count] = wire[position : position + count]
        del space
        decoder.advance(count)
        position += count
        assert decoder.held_bytes == position - 4
    frame = decoder.next_frame()
    assert frame is not None and bytes(frame) == payload
    assert decoder.frame_space() is None
    with pytest.raises(ValueError):
        decoder.advance(1)
