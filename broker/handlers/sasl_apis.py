"""SaslHandshake (17) and SaslAuthenticate (36) as the API layer sees them.

Authentication happens in the network layer (broker/net/authenticator.py), before
requests reach the API layer; these handlers exist so ApiVersions advertises both APIs
on every listener, as Kafka does, and answer what does reach them: a SASL request on
a listener without SASL, or on an authenticated connection that is not
re-authenticating, which is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from broker.net.request import Request
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse


class SaslHandshakeHandler:
    api_key = 17
    min_version = 0
    max_version = 1

    async def handle(self, request: Request) -> SaslHandshakeResponse:
        return self.error_response(request, ErrorCode.ILLEGAL_SASL_STATE)

    def error_response(self, request: Request, error_code: int) -> SaslHandshakeResponse:
        return SaslHandshakeResponse(error_code=error_code, mechanisms=())


class SaslAuthenticateHandler:
    api_key = 36
    min_version = 0
    max_version = 2

    async def handle(self, request: Request) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message=(
                "Unexpected SaslAuthenticate request: the connection is not authenticating "
                f"(listener {request.context.listener_name}, "
                f"{request.context.security_protocol})"
            ),
        )

    def error_response(self, request: Request, error_code: int) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(error_code=error_code)
