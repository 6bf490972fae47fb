"""ApiVersions (key 18): what this broker implements, and KIP-511's special cases.

Clients pick the highest version both sides support for every API, so the
list must contain only what the handlers really implement; it is read from
the API layer rather than written down a second time.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.net.request import Request
from broker.net.request_decoding import valid_client_software
from broker.protocol.api import ApiKey, reuse_encoding
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from broker.protocol.messages.api_versions_response import ApiVersion

API_KEY = ApiKey.API_VERSIONS


class ApiVersionsHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 4

    def __init__(self, supported_versions: Callable[[], dict[int, tuple[int, int]]]) -> None:
        self._supported_versions = supported_versions
        self._cached: tuple[dict[int, tuple[int, int]], ApiVersionsResponse] | None = None

    async def handle(self, request: Request) -> ApiVersionsResponse:
        if request.unsupported_version:
            # Answered as v0 (the API layer encodes it so): only our own entry.
            return ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                api_keys=(
                    ApiVersion(api_key=API_KEY, min_version=0, max_version=self.max_version),
                ),
            )
        body: ApiVersionsRequest = request.body
        if request.api_version >= 3 and not (
            valid_client_software(body.client_software_name)
            and valid_client_software(body.client_software_version)
        ):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
        return self._success()

    def _success(self) -> ApiVersionsResponse:
        """Every client asks on every connection: build the answer once per handler set."""
        supported = self._supported_versions()
        if self._cached is None or self._cached[0] is not supported:
            response = ApiVersionsResponse(
                error_code=ErrorCode.NONE,
                api_keys=tuple(
                    ApiVersion(api_key=key, min_version=low, max_version=high)
                    for key, (low, high) in supported.items()
                ),
            )
            self._cached = (supported, reuse_encoding(response))
        return self._cached[1]

    def error_response(self, request: Request, error_code: int) -> ApiVersionsResponse:
        return ApiVersionsResponse(error_code=error_code)
