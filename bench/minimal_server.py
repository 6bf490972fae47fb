"""The Python ceiling for the small-request benchmark: frame, answer, nothing else.

It reads size-prefixed frames and answers each with one fixed ApiVersions v0
response (correlation id patched in), one send per response, exactly as the
broker writes one response per request. Run: python -m bench.minimal_server PORT
"""

from __future__ import annotations

import struct
import sys

import trio

from broker.protocol.api import encode_response
from broker.protocol.messages import ApiVersionsResponse
from broker.protocol.messages.api_versions_response import ApiVersion

_SIZE = struct.Struct(">i")
_CID = struct.Struct(">i")


def fixed_response() -> bytes:
    body = ApiVersionsResponse(api_keys=(ApiVersion(18, 0, 4), ApiVersion(3, 0, 12)))
    return b"".join(bytes(c) for c in encode_response(18, 0, 0, body))


async def serve_connection(stream: trio.SocketStream) -> None:
    template = bytearray(fixed_response())
    buffer = bytearray()
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buffer += data
        while len(buffer) >= 4:
            size = _SIZE.unpack_from(buffer)[0]
            if len(buffer) < 4 + size:
                break
            correlation_id = buffer[8:12]
            del buffer[: 4 + size]
            template[4:8] = correlation_id
            await stream.send_all(bytes(template))


async def main(port: int) -> None:
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    print(f"listening on {listeners[0].socket.getsockname()[1]}", flush=True)
    await trio.serve_listeners(serve_connection, listeners)


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 0)
