"""Requests as the network layer builds them, from a chosen principal and host.

Authentication sets `RequestContext.principal`; handler tests set it directly so
that every handler's authorization is checked without a network or SASL.
"""

from __future__ import annotations

from typing import Any

from broker.net.request import ClientInformation, Request, RequestContext
from broker.protocol.api import RequestHeader

ALICE = "User:alice"
BOB = "User:bob"
HOST = "10.0.0.1"


def make_request(
    body: Any, api_key: int, version: int, principal: str = ALICE, host: str = HOST
) -> Request:
    return Request(
        header=RequestHeader(
            api_key=api_key, api_version=version, correlation_id=7, client_id="test"
        ),
        body=body,
        context=RequestContext(
            connection_id="c",
            processor_id=0,
            listener_name="PLAINTEXT",
            security_protocol="PLAINTEXT",
            client_address=host,
            client_port=40000,
            client_information=ClientInformation(),
            principal=principal,
        ),
        size_bytes=0,
    )
