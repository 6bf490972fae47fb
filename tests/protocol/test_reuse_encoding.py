"""Response bodies encoded once and reused (ApiVersions): same bytes as a fresh encoding."""

from __future__ import annotations

from collections.abc import Sequence

from broker.protocol.api import encode_response, reuse_encoding
from broker.protocol.messages import ApiVersionsResponse, MetadataResponse
from broker.protocol.messages.api_versions_response import ApiVersion
from broker.protocol.messages.metadata_response import MetadataResponseBroker


def frame(chunks: Sequence[bytes | bytearray | memoryview]) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def make_body(count: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            ApiVersion(api_key=k, min_version=0, max_version=k % 5) for k in range(count)
        ),
    )


def test_a_reused_body_encodes_to_the_same_frames_for_every_version_and_correlation_id() -> None:
    reused = reuse_encoding(make_body(30))
    for version in range(5):
        for correlation_id in (1, 7, 2**31 - 1):
            fresh = frame(encode_response(18, version, correlation_id, make_body(30)))
            assert frame(encode_response(18, version, correlation_id, reused)) == fresh
            # The second time comes from the stored bytes: still the same frame.
            assert frame(encode_response(18, version, correlation_id, reused)) == fresh


def test_a_changed_copy_of_a_reused_body_is_encoded_as_itself() -> None:
    reused = reuse_encoding(make_body(3))
    encode_response(18, 3, 1, reused)
    throttled = reused._replace(throttle_time_ms=250)
    assert frame(encode_response(18, 3, 1, throttled)) == frame(
        encode_response(18, 3, 1, make_body(3)._replace(throttle_time_ms=250))
    )
    assert frame(encode_response(18, 3, 1, throttled)) != frame(encode_response(18, 3, 1, reused))


def test_a_reused_body_of_a_flexible_api_keeps_its_tagged_response_header() -> None:
    # Metadata v9+ answers with response header v1 (correlation id + tagged fields).
    def body() -> MetadataResponse:
        return MetadataResponse(
            brokers=(MetadataResponseBroker(node_id=1, host="h", port=9092),),
            cluster_id="c",
            controller_id=1,
        )

    reused = reuse_encoding(body())
    for version in (1, 8, 9, 12):
        for correlation_id in (3, 2**31 - 1):
            fresh = frame(encode_response(3, version, correlation_id, body()))
            assert frame(encode_response(3, version, correlation_id, reused)) == fresh
            assert frame(encode_response(3, version, correlation_id, reused)) == fresh
