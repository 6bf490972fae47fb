"""The generated classes behave as immutable values, and the decoders' fast paths
agree with their general paths."""

from __future__ import annotations

import operator
import struct

import pytest

from broker.protocol import api
from broker.protocol.messages import ApiVersionsResponse, MetadataRequest, MetadataResponse
from broker.protocol.messages.api_versions_response import ApiVersion, SupportedFeatureKey
from broker.protocol.messages.metadata_response import MetadataResponsePartition


def _join(chunks: list[api.Buffer]) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def test_values_are_immutable_hashable_and_compare_by_class_and_value() -> None:
    a = ApiVersion(api_key=18, min_version=0, max_version=4)
    assert a == ApiVersion(18, 0, 4) and hash(a) == hash(ApiVersion(18, 0, 4))
    assert a != ApiVersion(18, 0, 5)
    assert a != (18, 0, 4) and not operator.eq((18, 0, 4), a)  # not a plain tuple
    assert ApiVersion(0, 1, 2) != SupportedFeatureKey(0, 1, 2)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        a.api_key = 1  # type: ignore[misc]
    assert repr(a) == "ApiVersion(api_key=18, min_version=0, max_version=4)"
    assert a._replace(max_version=7) == ApiVersion(18, 0, 7)
    assert type(a._replace(max_version=7)) is ApiVersion


def test_kafka_defaults_and_class_metadata() -> None:
    assert MetadataRequest(topics=None).allow_auto_topic_creation is True
    assert ApiVersionsResponse().finalized_features_epoch == -1
    assert (ApiVersionsResponse.API_KEY, ApiVersionsResponse.FLEXIBLE_FROM) == (18, 3)
    assert [f[0] for f in ApiVersion.FIELDS] == ["api_key", "min_version", "max_version"]


def test_fixed_width_array_falls_back_when_an_element_has_tagged_fields() -> None:
    body = ApiVersionsResponse(0, tuple(ApiVersion(k, 0, k) for k in range(5)), 0)
    wire = _join(api.encode_message(body, 3))
    # Element 2 (7 bytes each, after error_code and the compact count) gets an unknown tag.
    at = 2 + 1 + 2 * 7 + 6
    assert wire[at] == 0
    patched = wire[:at] + b"\x01\x05\x02zz" + wire[at + 1 :]
    assert api.decode_message(ApiVersionsResponse, patched, 3) == body
    fast = api.decode_message(ApiVersionsResponse, wire, 3)
    assert fast == body and all(type(item) is ApiVersion for item in fast.api_keys)


def test_truncated_fixed_width_array_is_a_decode_error() -> None:
    wire = _join(api.encode_message(ApiVersionsResponse(0, (ApiVersion(1, 2, 3),) * 4, 0), 1))
    with pytest.raises(api.DecodeError):
        api.decode_message(ApiVersionsResponse, wire[:-9], 1)


@pytest.mark.parametrize("replicas", [(), (1,), tuple(range(200))])
def test_compact_number_arrays_short_and_long(replicas: tuple[int, ...]) -> None:
    # 200 replicas need a two-byte length: the general path.
    part = MetadataResponsePartition(0, 1, 2, 3, replicas, replicas[:1], ())
    body = MetadataResponse(topics=(_topic(part),))
    wire = _join(api.encode_message(body, 12))
    assert api.decode_message(MetadataResponse, wire, 12) == body


def _topic(part: MetadataResponsePartition):  # type: ignore[no-untyped-def]
    from broker.protocol.messages.metadata_response import MetadataResponseTopic

    return MetadataResponseTopic(name="t", partitions=(part,))


def test_null_compact_number_array_is_rejected() -> None:
    wire = bytearray(
        _join(
            api.encode_message(
                MetadataResponse(topics=(_topic(MetadataResponsePartition(replica_nodes=(5,))),)),
                12,
            )
        )
    )
    # Replace the replica array (length byte 2, then int32 5) by a null (length byte 0).
    at = wire.index(b"\x02" + struct.pack(">i", 5))
    wire[at : at + 5] = b"\x00"
    with pytest.raises(api.DecodeError):
        api.decode_message(MetadataResponse, bytes(wire), 12)
