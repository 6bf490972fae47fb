"""Failed SASL logins (issue 22 item 2): what 1,000 wrong passwords a second cost a
legitimate SCRAM client, the broker's CPU and its log.

One `broker serve` process with a SASL_PLAINTEXT listener (SCRAM-SHA-256, the default
`connection.failed.authentication.delay.ms` of 100 ms). The legitimate client is timed
first alone, then during the attack: Metadata round trips on its authenticated
connection, and whole logins (connect, handshake, both SCRAM rounds) on new ones. The
attacker, in its own process at the lowest CPU priority (as in bench_hostile), runs
complete SCRAM exchanges for the real user with a wrong proof (the server's work is
the same as for a wrong password; the attacker skips the PBKDF2 a real guess costs) at
a fixed rate, bounded in count and time. Broker CPU per failed login is the attack
phase's CPU less the quiet phase's, over the failures; log lines are those the broker
wrote during the attack.
"""

from __future__ import annotations

import base64
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench import hostile_clients as hc
from bench.bench_hostile import _attack_in_process
from bench.bench_security import USER, _create_user, _login, scram_authenticate
from bench.servers import start_broker_listeners, stop_server
from broker.client.connection import KafkaConnection
from broker.protocol.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

MECHANISM = "SCRAM-SHA-256"
ATTACK_RATE = 1000  # wrong passwords per second
RUNS = 3  # alone/attacked pairs on one broker, samples pooled: the machine's noise is large
ATTACKERS = 200  # concurrent attackers: each failure waits out the 100 ms delay


async def _wrong_password(port: int) -> bool:
    """One SCRAM exchange for the real user with a wrong proof; True if refused."""
    async with await KafkaConnection.connect("127.0.0.1", port, "guesser") as connection:
        await connection.request(SaslHandshakeRequest(MECHANISM), 1)
        nonce = base64.b64encode(os.urandom(18)).decode()
        first = await connection.request(
            SaslAuthenticateRequest(f"n,,n={USER},r={nonce}".encode()), 2
        )
        server_nonce = first.auth_bytes.decode().split(",")[0][2:]
        proof = base64.b64encode(os.urandom(32)).decode()
        final = await connection.request(
            SaslAuthenticateRequest(f"c=biws,r={server_nonce},p={proof}".encode()), 2
        )
        return bool(final.error_code)


async def wrong_passwords(port: int, deadline: float) -> dict[str, Any]:
    """ATTACK_RATE wrong passwords a second until `deadline`, at most that many in all."""
    budget = int((deadline - trio.current_time()) * ATTACK_RATE)
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
            for _ in range(ATTACKERS):
                nursery.start_soon(attacker)
    return {"failed logins": refused[0], "attacker errors": errors[0]}


async def _legitimate(
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


def _log_lines(path: Path) -> int:
    with path.open("rb") as log:
        return sum(1 for _ in log)


def _columns(name: str, before: list[float], during: list[float]) -> dict[str, Any]:
    p50 = (hc.percentile(before, 0.5), hc.percentile(during, 0.5))
    p99 = (hc.percentile(before, 0.99), hc.percentile(during, 0.99))
    return {
        f"{name} p50 ms (alone / attacked)": f"{p50[0] * 1e3:.2f} / {p50[1] * 1e3:.2f}",
        f"{name} p99 ms (alone / attacked)": f"{p99[0] * 1e3:.2f} / {p99[1] * 1e3:.2f}",
        f"{name} p99 ratio": p99[1] / p99[0],
    }


def run(duration_s: float = 4.0) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        process, ports = start_broker_listeners(
            work,
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": MECHANISM,
            },
        )
        try:
            trio.run(_create_user, ports["PLAINTEXT"])
            runs = [
                _one_run(process.pid, ports["SASL_PLAINTEXT"], work, duration_s)
                for _ in range(RUNS)
            ]
        finally:
            stop_server(process)

    def pooled(key: str) -> list[float]:
        return [sample for run in runs for sample in run[key]]

    failed = sum(run["failed"] for run in runs)
    return [
        {
            "attack": f"{ATTACK_RATE} wrong SCRAM passwords/s, {RUNS} x {duration_s:.0f} s",
            "failed logins": failed,
            "attacker errors": sum(run["errors"] for run in runs),
            **_columns("request", pooled("alone requests"), pooled("attacked requests")),
            **_columns("login", pooled("alone logins"), pooled("attacked logins")),
            "request p99 ratio per run": " ".join(f"{run['ratio']:.2f}" for run in runs),
            "broker cpu us / failed login": sum(run["cpu"] for run in runs) / max(failed, 1) * 1e6,
            "log lines during attack": sum(run["lines"] for run in runs),
        }
    ]


def _one_run(pid: int, port: int, work: Path, duration_s: float) -> dict[str, Any]:
    """The legitimate client alone, then beside the attack; the attack's CPU net of the
    quiet phase's."""
    alone: tuple[list[float], list[float]] = ([], [])
    attacked: tuple[list[float], list[float]] = ([], [])
    cpu_start = hc.cpu_seconds(pid)
    trio.run(_phase, port, duration_s, *alone)
    quiet_cpu = hc.cpu_seconds(pid) - cpu_start
    lines_before = _log_lines(work / "broker.log")
    cpu_before = hc.cpu_seconds(pid)
    attack = _attack_in_process(
        wrong_passwords, port, duration_s, lambda: trio.run(_phase, port, duration_s, *attacked)
    )
    return {
        "alone requests": alone[0],
        "alone logins": alone[1],
        "attacked requests": attacked[0],
        "attacked logins": attacked[1],
        "ratio": hc.percentile(attacked[0], 0.99) / hc.percentile(alone[0], 0.99),
        "failed": attack["failed logins"],
        "errors": attack["attacker errors"],
        "cpu": hc.cpu_seconds(pid) - cpu_before - quiet_cpu,
        "lines": _log_lines(work / "broker.log") - lines_before,
    }


async def _phase(port: int, duration_s: float, requests: list[float], logins: list[float]) -> None:
    await _legitimate(port, trio.current_time() + duration_s, requests, logins)


if __name__ == "__main__":
    for row in run(float(os.environ.get("BENCH_DURATION", "4"))):
        for key, value in row.items():
            print(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
