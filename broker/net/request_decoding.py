"""A request frame decoded as a processor must (sans-IO): header, version check, body.

Shared by a new connection's screening (its first frame is decoded before it has a
task, first_read) and by the connection state machine, so both close a connection
for exactly the same frames: an undecodable header or body (`DecodeError`) or an api
key or version the broker does not serve (`UnsupportedApi`), except ApiVersions,
answered with a v0 body instead (KIP-511).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from broker.net.request import ClientInformation
from broker.protocol.api import ApiKey, RequestHeader, decode_request, decode_request_header
from broker.protocol.framing import Frame

API_VERSIONS_KEY = ApiKey.API_VERSIONS
_SOFTWARE_FIELD = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

IsEnabled = Callable[[int, int], bool]


class CloseConnection(Exception):
    """Stop serving this connection (the reason is logged by whoever closes it)."""


class UnsupportedApi(CloseConnection):
    """An api key or version the broker does not serve: Kafka closes the connection."""


class Decoded(NamedTuple):
    """A request's header, body, the body's offset in its frame, and whether its version
    is unsupported (an ApiVersions answered with v0, KIP-511). A tuple: one per request."""

    header: RequestHeader
    body: Any
    offset: int
    unsupported: bool


def decode_frame(frame: Frame, is_enabled: IsEnabled) -> Decoded:
    """Decode a frame, or raise what closes its connection."""
    header, offset = decode_request_header(frame)
    api_key = header.api_key
    version = header.api_version
    if not is_enabled(api_key, version):
        if api_key == API_VERSIONS_KEY:
            return Decoded(header, None, offset, True)
        raise UnsupportedApi(f"unsupported api key {api_key} version {version}")
    return Decoded(header, decode_request(header, frame, offset), offset, False)


def valid_client_software(value: str) -> bool:
    """KIP-511's rule for ApiVersions client software name and version."""
    return _SOFTWARE_FIELD.fullmatch(value) is not None


def client_information(decoded: Decoded) -> ClientInformation | None:
    """What an ApiVersions v3+ request says of the client's software, when valid."""
    header = decoded.header
    if header.api_key != API_VERSIONS_KEY or header.api_version < 3 or decoded.unsupported:
        return None
    name = getattr(decoded.body, "client_software_name", "") or ""
    version = getattr(decoded.body, "client_software_version", "") or ""
    if valid_client_software(name) and valid_client_software(version):
        return ClientInformation(name, version)
    return None
