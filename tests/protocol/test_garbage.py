"""Malformed input only ever raises DecodeError (never a low-level error or a hang)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import api
from broker.protocol.messages import MetadataRequest, ProduceRequest
from tests.protocol.strategies import all_pairs, struct_strategy

REQUEST_KEYS = sorted(api.REQUEST_TYPES)
PAIRS = all_pairs()


def _decode_frame(frame: bytes) -> None:
    try:
        header, offset = api.decode_request_header(frame)
        api.decode_request(header, frame, offset)
    except api.DecodeError:
        pass


@given(st.binary(max_size=200))
def test_arbitrary_request_frames(frame: bytes) -> None:
    _decode_frame(frame)


@given(
    st.sampled_from(REQUEST_KEYS),
    st.integers(0, 20),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=120),
)
def test_valid_header_garbage_body(api_key: int, version: int, corr: int, body: bytes) -> None:
    header = api.RequestHeader(api_key, version, corr, "c")
    hv = api.request_header_version(api_key, version)
    hdr = b"".join(bytes(c) for c in api.encode_message(header, hv))
    _decode_frame(hdr + body)


@given(st.sampled_from(sorted(api.RESPONSE_TYPES)), st.integers(0, 20), st.binary(max_size=150))
def test_arbitrary_response_frames(api_key: int, version: int, frame: bytes) -> None:
    with contextlib.suppress(api.DecodeError):
        api.decode_response(api_key, version, frame)


@settings(max_examples=200)
@given(st.data())
def test_mutated_and_truncated_valid_encodings(data: st.DataObject) -> None:
    cls, version = data.draw(st.sampled_from(PAIRS))
    obj = data.draw(struct_strategy(cls, version))
    wire = bytearray(b"".join(bytes(c) for c in api.encode_message(obj, version)))
    if wire:
        for _ in range(data.draw(st.integers(0, 4))):
            pos = data.draw(st.integers(0, len(wire) - 1))
            wire[pos] = data.draw(st.integers(0, 255))
        wire = wire[: data.draw(st.integers(0, len(wire)))]
    with contextlib.suppress(api.DecodeError):
        api.decode_message(cls, bytes(wire), version)


def _request(api_key: int, version: int, body: bytes) -> bytes:
    flexible = api.request_header_version(api_key, version) == 2
    return (
        struct.pack(">hhih", api_key, version, 1, 1) + b"c" + (b"\x00" if flexible else b"") + body
    )


BAD_FRAMES = {
    "empty": b"",
    "short header": b"\x00\x03\x00",
    "negative client id length": struct.pack(">hhih", 3, 1, 1, -5),
    "client id longer than frame": struct.pack(">hhih", 3, 1, 1, 100) + b"abc",
    "invalid utf8 client id": struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe",
    # MetadataRequest v1: huge topic array count with no bytes behind it.
    "huge array count": _request(3, 1, struct.pack(">i", 2**31 - 1)),
    "negative array count": _request(3, 1, struct.pack(">i", -7)),
    # MetadataRequest v1 topics=[name] with a negative string length.
    "negative string length": _request(3, 1, struct.pack(">ih", 1, -3)),
    "invalid utf8 topic": _request(3, 1, struct.pack(">ih", 1, 2) + b"\xc3\x28"),
    # MetadataRequest v12 (flexible): varint truncated / overflowing.
    "truncated varint": _request(3, 12, b"\xff"),
    "varint overflow": _request(3, 12, b"\xff\xff\xff\xff\xff\xff\x01"),
    "varint too long": _request(3, 12, b"\x80\x80\x80\x80\x80\x01"),
    "huge compact array": _request(3, 12, b"\xff\xff\xff\xff\x0f"),
    "huge tag count": _request(3, 12, b"\x01\x00\x00\xff\xff\xff\xff\x0f"),
    "tag size beyond frame": _request(3, 12, b"\x01\x00\x00\x01\x05\xff\xff\xff\x0f"),
    "null non-nullable string": _request(0, 9, b"\x00\x00\x01\x00\x00\x00\x00\x02\x00"),
    # ProduceRequest v3: records length larger than what is left.
    "records too long": _request(
        0, 3, struct.pack(">hhiihiii", -1, 1, 1000, 1, 1, ord("t"), 1, 0)[:-4]
    ),
}


@pytest.mark.parametrize("frame", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_hand_written_bad_frames(frame: bytes) -> None:
    with pytest.raises(api.DecodeError):
        header, offset = api.decode_request_header(frame)
        api.decode_request(header, frame, offset)


def test_non_nullable_array_null_is_rejected() -> None:
    # ProduceRequest v9 topic_data = null (compact length 0) is not allowed.
    with pytest.raises(api.DecodeError):
        api.decode_message(ProduceRequest, b"\x00\x00\x01\x00\x00\x00\x00\x00\x00", 9)


def test_memoryview_input_and_trailing_bytes() -> None:
    data = b"".join(bytes(c) for c in api.encode_message(MetadataRequest(None), 12))
    assert api.decode_message(MetadataRequest, memoryview(data + b"xx"), 12) == MetadataRequest(
        None
    )


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(value: int) -> None:
    from broker.protocol.primitives import read_uvarint, write_uvarint

    out = bytearray()
    write_uvarint(out, value)
    assert read_uvarint(memoryview(bytes(out) + b"\x00"), 0) == (value, len(out))
