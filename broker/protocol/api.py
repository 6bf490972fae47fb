"""Entry points of the Kafka wire-protocol codec.

The generated per-message code (``broker.protocol.messages``) is deliberately free
of exception handling so its inner loops stay fast; this module is the one place
where low-level failures (``struct.error``, ``IndexError``, ``UnicodeDecodeError``
...) are turned into :class:`DecodeError` / :class:`EncodeError`, and where the
header-version rules, which depend on the api key and version, live.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from broker.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from broker.protocol.messages.registry import (
    API_NAMES,
    CODECS,
    REQUEST_FLEXIBLE_FROM,
    REQUEST_TYPES,
    RESPONSE_FLEXIBLE_FROM,
    RESPONSE_TYPES,
    SUPPORTED_VERSIONS,
    ApiKey,
)
from broker.protocol.messages.request_header import READERS as _REQ_HDR_READERS
from broker.protocol.messages.request_header import WRITERS as _REQ_HDR_WRITERS
from broker.protocol.messages.request_header import RequestHeader
from broker.protocol.messages.response_header import READERS as _RESP_HDR_READERS
from broker.protocol.messages.response_header import WRITERS as _RESP_HDR_WRITERS
from broker.protocol.messages.response_header import ResponseHeader
from broker.protocol.primitives import Buffer, Ext

__all__ = [
    "API_NAMES",
    "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "Buffer",
    "DecodeError",
    "EncodeError",
    "RequestHeader",
    "ResponseHeader",
    "UnsupportedVersionError",
    "decode_message",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_message",
    "encode_request",
    "encode_response",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = ApiKey.API_VERSIONS

_LOW_LEVEL_DECODE_ERRORS = (
    struct.error,
    IndexError,
    ValueError,  # includes UnicodeDecodeError
    OverflowError,
    MemoryError,
    RecursionError,
    TypeError,
)
_LOW_LEVEL_ENCODE_ERRORS = (
    struct.error,
    AttributeError,
    TypeError,
    ValueError,  # includes UnicodeEncodeError
    OverflowError,
)
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version (1 or 2) for an api key and version.

    Flexibility follows the ``N+`` rule even beyond ``validVersions`` because the
    broker must parse the header of, e.g., an ApiVersions request newer than it
    supports in order to answer it. Unknown api keys get v1, the most that can be
    assumed about them.
    """
    flexible_from = REQUEST_FLEXIBLE_FROM.get(api_key)
    if flexible_from is not None and api_version >= flexible_from:
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version (0 or 1); ApiVersions responses always use v0.

    ApiVersions is exempt so that a client which sent a version the broker does not
    support can still read the (v0-encoded) error response.
    """
    if api_key == API_VERSIONS_KEY:
        return 0
    flexible_from = RESPONSE_FLEXIBLE_FROM.get(api_key)
    if flexible_from is not None and api_version >= flexible_from:
        return 1
    return 0


def _as_view(data: Buffer) -> memoryview:
    if type(data) is bytes:
        return memoryview(data)  # always one-dimensional bytes
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of ``frame`` (no size prefix).

    Returns the header and the offset at which the request body starts.
    """
    try:
        mv = _as_view(frame)
        api_key, api_version = _KEY_VERSION.unpack_from(mv, 0)
        reader = _REQ_HDR_READERS[request_header_version(api_key, api_version)]
        return reader(mv, 0)
    except DecodeError:
        raise
    except _LOW_LEVEL_DECODE_ERRORS as e:
        raise DecodeError(f"malformed request header: {e}") from e


def _reader_for(types: Mapping[int, type], api_key: int, api_version: int, what: str) -> Any:
    cls = types.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    reader = CODECS[cls][0].get(api_version)
    if reader is None:
        raise UnsupportedVersionError(
            f"unsupported {what} version {api_version} for {cls.__name__}"
        )
    return reader


def decode_request(header: RequestHeader, frame: Buffer, offset: int) -> Any:
    """Decode the body of a request whose header was decoded from the same frame.

    Records fields of the result are slices of ``frame`` (no copy).
    """
    reader = _reader_for(REQUEST_TYPES, header.api_key, header.api_version, "request")
    try:
        return reader(_as_view(frame), offset)[0]
    except DecodeError:
        raise
    except _LOW_LEVEL_DECODE_ERRORS as e:
        raise DecodeError(f"malformed {API_NAMES[header.api_key]} request: {e}") from e


def decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[int, Any]:
    """Decode a response frame (no size prefix) into ``(correlation_id, body)``."""
    reader = _reader_for(RESPONSE_TYPES, api_key, api_version, "response")
    try:
        mv = _as_view(frame)
        header, pos = _RESP_HDR_READERS[response_header_version(api_key, api_version)](mv, 0)
        return header.correlation_id, reader(mv, pos)[0]
    except DecodeError:
        raise
    except _LOW_LEVEL_DECODE_ERRORS as e:
        raise DecodeError(f"malformed response for api key {api_key}: {e}") from e


def decode_message(cls: type, data: Buffer, version: int) -> Any:
    """Decode a bare message or data type (no header), e.g. ConsumerProtocolSubscription."""
    try:
        reader = CODECS[cls][0][version]
    except KeyError:
        if cls not in CODECS:
            raise TypeError(f"{cls!r} is not a generated top-level message type") from None
        raise UnsupportedVersionError(f"unsupported version {version} for {cls.__name__}") from None
    try:
        return reader(memoryview(data) if type(data) is bytes else _as_view(data), 0)[0]
    except DecodeError:
        raise
    except _LOW_LEVEL_DECODE_ERRORS as e:
        raise DecodeError(f"malformed {cls.__name__}: {e}") from e


def _writer_for(body: Any, version: int) -> Any:
    codec = CODECS.get(type(body))
    if codec is None:
        raise EncodeError(f"{type(body).__name__} is not a generated top-level message type")
    writer = codec[1].get(version)
    if writer is None:
        raise EncodeError(f"{type(body).__name__} has no version {version}")
    return writer


def _chunks(out: bytearray, ext: Ext, size_prefixed: bool) -> list[Buffer]:
    """Split the output around the large payloads that were kept out of it."""
    if size_prefixed:
        total = len(out) - 4
        for _, payload in ext:
            total += payload.nbytes if isinstance(payload, memoryview) else len(payload)
        _SIZE.pack_into(out, 0, total)
    if not ext:
        return [out]
    view = memoryview(out)
    chunks: list[Buffer] = []
    prev = 0
    for offset, payload in ext:
        if offset > prev:
            chunks.append(view[prev:offset])
        chunks.append(payload)
        prev = offset
    if prev < len(out):
        chunks.append(view[prev:])
    return chunks


def encode_message(body: Any, version: int) -> list[Buffer]:
    """Encode a bare message or data type (no size prefix, no header)."""
    writer = _writer_for(body, version)
    out = bytearray()
    ext: Ext = []
    try:
        writer(out, ext, body)
    except EncodeError:
        raise
    except _LOW_LEVEL_ENCODE_ERRORS as e:
        raise EncodeError(f"cannot encode {type(body).__name__} v{version}: {e}") from e
    return _chunks(out, ext, False)


def encode_request(header: RequestHeader, body: Any) -> list[Buffer]:
    """Encode a whole request frame, including the 4-byte size prefix."""
    writer = _writer_for(body, header.api_version)
    out = bytearray(4)
    ext: Ext = []
    try:
        _REQ_HDR_WRITERS[request_header_version(header.api_key, header.api_version)](
            out, ext, header
        )
        writer(out, ext, body)
    except EncodeError:
        raise
    except _LOW_LEVEL_ENCODE_ERRORS as e:
        raise EncodeError(f"cannot encode {type(body).__name__}: {e}") from e
    return _chunks(out, ext, True)


_REUSED_LIMIT = 16
_reused: dict[int, tuple[Any, dict[int, bytes]]] = {}


def reuse_encoding(body: Any) -> Any:
    """Mark a response body that a handler returns again and again (ApiVersions, asked
    on every connection): `encode_response` then encodes it once per version and
    reuses the bytes. The body must never change (they are immutable; a changed copy
    is another object and is encoded as usual). Returns the body."""
    if len(_reused) >= _REUSED_LIMIT:
        _reused.pop(next(iter(_reused)))
    _reused[id(body)] = (body, {})
    return body


_SIZE_AND_HEADER_V0 = struct.Struct(">ii")
_SIZE_AND_HEADER_V1 = struct.Struct(">iiB")  # correlation id, no tagged fields


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> list[Buffer]:
    """Encode a whole response frame, including the size prefix and response header."""
    reused = _reused.get(id(body)) if _reused else None
    if reused is not None and reused[0] is body:
        encoded = reused[1].get(api_version)
        if encoded is not None:
            # A body encoded before: only the size prefix and header are new.
            if response_header_version(api_key, api_version) == 0:
                prefix = _SIZE_AND_HEADER_V0.pack(len(encoded) + 4, correlation_id)
            else:
                prefix = _SIZE_AND_HEADER_V1.pack(len(encoded) + 5, correlation_id, 0)
            return [prefix + encoded]
    writer = _writer_for(body, api_version)
    out = bytearray(4)
    ext: Ext = []
    try:
        _RESP_HDR_WRITERS[response_header_version(api_key, api_version)](
            out, ext, ResponseHeader(correlation_id)
        )
        if reused is not None and reused[0] is body:
            start = len(out)
            writer(out, ext, body)
            if not ext:
                reused[1][api_version] = bytes(out[start:])
        else:
            writer(out, ext, body)
    except EncodeError:
        raise
    except _LOW_LEVEL_ENCODE_ERRORS as e:
        raise EncodeError(f"cannot encode {type(body).__name__}: {e}") from e
    return _chunks(out, ext, True)
