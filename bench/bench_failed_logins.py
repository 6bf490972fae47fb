"""Failed SASL logins (issue 22 item 2): the attack and the legitimate SCRAM client of the
"1,000 wrong SCRAM passwords/s" row of the hostile-load table (bench/bench_hostile.py).

The broker has a SASL_PLAINTEXT listener (SCRAM-SHA-256, the default
`connection.failed.authentication.delay.ms` of 100 ms) beside its PLAINTEXT one. The
legitimate client times Metadata round trips on its authenticated connection, and whole
logins (connect, handshake, both SCRAM rounds) on new ones. The attacker runs complete
SCRAM exchanges for the real user with a wrong proof (the server's work is the same as
for a wrong password; the attacker skips the PBKDF2 a real guess costs) at a fixed rate,
bounded in count and time.
"""

from __future__ import annotations

import base64
import os
import time
from typing import Any

import trio

from bench.bench_security import USER, _create_user, _login, scram_authenticate
from broker.client.connection import KafkaConnection
from broker.protocol.api import decode_response, encode_request
from broker.protocol.framing import FrameDecoder
from broker.protocol.messages import (
    MetadataRequest,
    RequestHeader,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

MECHANISM = "SCRAM-SHA-256"
ATTACK_RATE = 1000  # wrong passwords per second
ATTACKERS = 200  # concurrent attackers: each failure waits out the 100 ms delay
OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": MECHANISM,
}


_CLIENT_ID = "guesser"
_NONCE = "guessing-nonce-guessing-nonce"
_PROOF = base64.b64encode(os.urandom(32)).decode()
_HANDSHAKE_V, _AUTHENTICATE_V = 1, 2


def _frame(correlation_id: int, body: Any, version: int) -> bytes:
    header = RequestHeader(int(body.API_KEY), version, correlation_id, _CLIENT_ID)
    return b"".join(encode_request(header, body))


# The handshake and the client-first message are the same for every guess: encoded once.
_OPENING = _frame(1, SaslHandshakeRequest(MECHANISM), _HANDSHAKE_V) + _frame(
    2, SaslAuthenticateRequest(f"n,,n={USER},r={_NONCE}".encode()), _AUTHENTICATE_V
)


async def _receive(sock: trio.socket.SocketType, decoder: FrameDecoder) -> bytes:
    while (frame := decoder.next_frame()) is None:
        data = await sock.recv(decoder.read_size())
        if not data:
            raise EOFError("the broker closed the connection")
        decoder.feed(data)
    return bytes(frame)


async def _wrong_password(port: int) -> bool:
    """One SCRAM exchange for the real user with a wrong proof; True if refused.

    On a bare socket, the handshake and the client-first message sent together and
    encoded once: the attacker's own CPU per guess is a fraction of the broker's, so
    that on a small machine the attack reaches its rate (through the client library it
    cost about 3 ms a guess, and the attack reached 141-254 of its 1,000 a second)."""
    with trio.socket.socket() as sock:
        await sock.connect(("127.0.0.1", port))
        await sock.send(_OPENING)
        decoder = FrameDecoder(1 << 20)
        await _receive(sock, decoder)  # the handshake's answer
        _, first = decode_response(
            int(SaslAuthenticateRequest.API_KEY), _AUTHENTICATE_V, await _receive(sock, decoder)
        )
        server_nonce = first.auth_bytes.decode().split(",")[0][2:]
        final = f"c=biws,r={server_nonce},p={_PROOF}".encode()
        await sock.send(_frame(3, SaslAuthenticateRequest(final), _AUTHENTICATE_V))
        _, answer = decode_response(
            int(SaslAuthenticateRequest.API_KEY), _AUTHENTICATE_V, await _receive(sock, decoder)
        )
        return bool(answer.error_code)


async def wrong_passwords(port: int, deadline: float) -> dict[str, Any]:
    """ATTACK_RATE wrong passwords a second until `deadline`, at most that many in all;
    the refused ones are the attack's units."""
    budget = int((deadline - trio.current_time()) * ATTACK_RATE)
    cpu_started = time.process_time()
    next_at = [trio.current_time()]
    refused = [0]
    errors = [0]

    async def attacker() -> None:
        while budget > refused[0] + errors[0] and trio.current_time() < deadline:
            slot = next_at[0]
            next_at[0] += 1 / ATTACK_RATE
            await trio.sleep_until(slot)
            try:
                with trio.move_on_after(5):
                    was_refused = await _wrong_password(port)
                    refused[0] += was_refused  # not `+= await`: that reads before the wait
            except (OSError, trio.BrokenResourceError, EOFError, ConnectionError):
                errors[0] += 1

    with trio.move_on_at(deadline + 5):
        async with trio.open_nursery() as nursery:
            for _ in range(min(ATTACKERS, max(budget, 1))):
                nursery.start_soon(attacker)
    cpu_us = (time.process_time() - cpu_started) * 1e6
    return {
        "attack units": refused[0],
        "attacker errors": errors[0],
        "attacker cpu us / unit": round(cpu_us / refused[0]) if refused[0] else "-",
    }


async def create_user(plaintext_port: int) -> None:
    """The SCRAM user both the legitimate client and the attacker name."""
    await _create_user(plaintext_port)


async def scram_client(
    port: int, deadline: float, requests: list[float], logins: list[float]
) -> None:
    """Metadata on an authenticated connection, and whole logins, timed until `deadline`."""

    async def metadata_loop() -> None:
        async with await KafkaConnection.connect("127.0.0.1", port, "legit") as connection:
            await scram_authenticate(connection, MECHANISM)
            while trio.current_time() < deadline:
                started = time.perf_counter()
                await connection.request(MetadataRequest(topics=None), 9)
                requests.append(time.perf_counter() - started)
                await trio.sleep(0.005)

    async def login_loop() -> None:
        while trio.current_time() < deadline:
            started = time.perf_counter()
            await _login(port, MECHANISM)
            logins.append(time.perf_counter() - started)
            await trio.sleep(0.02)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(metadata_loop)
        nursery.start_soon(login_loop)
