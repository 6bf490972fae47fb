"""Header-version rules and framing of whole requests and responses."""

from __future__ import annotations

import struct

import pytest

from broker.protocol import api
from broker.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
)
from broker.protocol.messages.api_versions_response import ApiVersion
from broker.protocol.messages.fetch_response import (
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    PartitionData,
)
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData


def _join(chunks: list[api.Buffer]) -> bytes:
    return b"".join(bytes(c) for c in chunks)


@pytest.mark.parametrize("version", range(0, 8))
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    assert api.response_header_version(18, version) == 0


def test_flexible_requests_use_header_v2() -> None:
    for api_key, cls in api.REQUEST_TYPES.items():
        lo, hi = api.SUPPORTED_VERSIONS[api_key]
        for v in range(lo, hi + 1):
            flexible = cls.FLEXIBLE_FROM is not None and v >= cls.FLEXIBLE_FROM  # type: ignore[attr-defined]
            assert api.request_header_version(api_key, v) == (2 if flexible else 1)
            if api_key != 18:
                assert api.response_header_version(api_key, v) == (1 if flexible else 0)


def test_unknown_api_key_and_future_versions() -> None:
    assert api.request_header_version(9999, 5) == 1
    assert api.request_header_version(18, 99) == 2  # N+ rule beyond validVersions
    assert api.request_header_version(18, 2) == 1


def test_tables() -> None:
    assert api.API_NAMES[0] == "Produce"
    assert api.API_NAMES[18] == "ApiVersions"
    assert api.REQUEST_TYPES[3] is MetadataRequest
    assert api.RESPONSE_TYPES[18] is ApiVersionsResponse
    assert api.SUPPORTED_VERSIONS[0] == (ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION)


def test_request_frame_roundtrip_with_zero_copy_records() -> None:
    payload = bytes(range(256)) * 64
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=(TopicProduceData("t", (PartitionProduceData(3, payload),)),),
    )
    header = api.RequestHeader(0, 9, 7, "client")
    chunks = api.encode_request(header, body)
    assert any(c is payload for c in chunks), "records payload must not be copied"
    wire = _join(chunks)
    (size,) = struct.unpack_from(">i", wire)
    assert size == len(wire) - 4
    frame = memoryview(wire)[4:]
    hdr, offset = api.decode_request_header(frame)
    assert hdr == header
    decoded = api.decode_request(hdr, frame, offset)
    assert decoded == body
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is wire  # a view into the input, not a copy


def test_request_header_v2_client_id_is_not_compact() -> None:
    header = api.RequestHeader(18, 3, 1, "abc")
    wire = _join(api.encode_request(header, ApiVersionsRequest("x", "1")))
    assert wire[4:18] == struct.pack(">hhih", 18, 3, 1, 3) + b"abc" + b"\x00"


def test_unsupported_api_versions_request_header_is_parseable() -> None:
    # ApiVersions v99 from a future client: header v2, body unknown.
    frame = struct.pack(">hhih", 18, 99, 5, 2) + b"id" + b"\x00" + b"whatever"
    hdr, offset = api.decode_request_header(frame)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, 99, 5, "id")
    assert offset == 13
    with pytest.raises(api.UnsupportedVersionError):
        api.decode_request(hdr, frame, offset)


def test_unknown_api_key_header_uses_v1() -> None:
    frame = struct.pack(">hhih", 4242, 0, 9, -1) + b"body"
    hdr, offset = api.decode_request_header(frame)
    assert hdr.client_id is None and offset == 10
    with pytest.raises(api.UnsupportedVersionError):
        api.decode_request(hdr, frame, offset)


def test_api_versions_response_frame_uses_header_v0() -> None:
    body = ApiVersionsResponse(0, (ApiVersion(0, 0, 11), ApiVersion(18, 0, 4)), 0)
    wire = _join(api.encode_response(18, 3, 77, body))
    assert struct.unpack_from(">ii", wire) == (len(wire) - 4, 77)
    # No tagged-field byte after the correlation id: the body starts right away.
    assert wire[8:10] == b"\x00\x00"  # error_code
    assert api.decode_response(18, 3, wire[4:]) == (77, body)


def test_flexible_response_uses_header_v1() -> None:
    body = FetchResponse(
        responses=(
            FetchableTopicResponse(
                "t",
                partitions=(
                    PartitionData(
                        partition_index=1,
                        current_leader=LeaderIdAndEpoch(3, 4),
                        records=b"r" * 5000,
                    ),
                ),
            ),
        )
    )
    chunks = api.encode_response(1, 12, 5, body)
    wire = _join(chunks)
    assert wire[8] == 0  # empty tagged fields of response header v1
    assert api.decode_response(1, 12, wire[4:]) == (5, body)


def test_unknown_tags_are_skipped() -> None:
    # MetadataRequest v12 with topics=null, two bools and an unknown tag 7 (3 bytes).
    known = api.encode_message(MetadataRequest(None, False, False), 12)
    plain = _join(known)
    assert plain[-1] == 0
    with_tag = plain[:-1] + b"\x01\x07\x03abc"
    assert api.decode_message(MetadataRequest, with_tag, 12) == MetadataRequest(None, False, False)
    # Unknown tags alongside known ones (ApiVersionsResponse v3 has tags 0-3).
    body = ApiVersionsResponse(0, (), 0, finalized_features_epoch=5)
    data = _join(api.encode_message(body, 3))
    count_pos = len(data) - len(b"\x01\x01\x08" + struct.pack(">q", 5))
    assert data[count_pos] == 1
    patched = data[:count_pos] + b"\x02\x01\x08" + struct.pack(">q", 5) + b"\x1f\x02zz"
    assert api.decode_message(ApiVersionsResponse, patched, 3) == body


def test_encode_errors() -> None:
    with pytest.raises(api.EncodeError):
        api.encode_message(ProduceRequest(topic_data=(TopicProduceData(None),)), 9)  # type: ignore[arg-type]
    with pytest.raises(api.EncodeError):
        api.encode_message(ProduceRequest(acks=1 << 20), 9)
    with pytest.raises(api.EncodeError):
        api.encode_message(ProduceRequest(), 99)
