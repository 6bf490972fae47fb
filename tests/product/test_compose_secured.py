"""The secured example of compose.yaml (profile `secured`), checked without a Docker engine:
its shape, then its command run natively as tests/product/test_compose.py runs the broker's,
with certificates made at test time in place of ./secrets, the first SCRAM user created as
docs/compose.md says, and a SCRAM login over SASL_SSL with the documented client.properties."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import trio
import trustme

from broker.env_overrides import config_key
from tests.product.test_compose import ROOT, SERVICES, _native_environment, free_port


def _documented(pattern: str) -> str:
    """A command or block from docs/compose.md's secured example, as a user copies it."""
    match = re.search(pattern, (ROOT / "docs" / "compose.md").read_text(), re.MULTILINE)
    assert match, pattern
    return match.group(1)


def test_secured_example_is_a_profile_with_sasl_ssl_outside_and_plaintext_inside() -> None:
    service = SERVICES["broker-secured"]
    assert service["profiles"] == ["secured"]
    env = {config_key(k): str(v) for k, v in service["environment"].items()}
    protocols = dict(p.split(":") for p in env["listener.security.protocol.map"].split(","))
    assert protocols == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    published = {p.split(":")[0] for p in service["ports"]}
    external = re.search(r"EXTERNAL://[^:]+:(\d+)", env["listeners"])
    internal = re.search(r"INTERNAL://[^:]+:(\d+)", env["listeners"])
    assert external and internal
    assert external.group(1) in published and internal.group(1) not in published
    mount = next(v for v in service["volumes"] if v.startswith("./secrets:"))
    assert mount.endswith(":ro")
    assert env["listener.name.external.ssl.keystore.location"].startswith(mount.split(":")[1])
    assert service["healthcheck"]["test"][-1] == f"127.0.0.1:{internal.group(1)}"


async def test_secured_example_serves_scram_over_sasl_ssl_after_the_documented_first_user(
    tmp_path: Path,
) -> None:
    ca = trustme.CA()
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    ca.cert_pem.write_to_path(str(secrets_dir / "ca.pem"))
    server = ca.issue_cert("localhost", "broker-secured", "127.0.0.1")
    server.private_key_and_cert_chain_pem.write_to_path(str(secrets_dir / "broker.pem"))
    service = SERVICES["broker-secured"]
    container_dir = next(v for v in service["volumes"] if v.startswith("./secrets:")).split(":")[1]

    internal, external, metrics = free_port(), free_port(), free_port()
    rewrites = {29093: internal, 9093: external, 9405: metrics}
    env = _native_environment(
        rewrites, tmp_path / "data", "broker-secured", {container_dir: str(secrets_dir)}
    )
    log_path = tmp_path / "broker.log"
    with log_path.open("w") as log_file:
        process = subprocess.Popen(  # noqa: ASYNC220 - returns at once; stopped below
            [sys.executable, "-m", "broker.env_overrides", *service["command"]],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while "started" not in log_path.read_text():
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            await trio.sleep(0.05)

        async def run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
            argv = [re.sub(r":(29093|9093)$", lambda m: f":{rewrites[int(m[1])]}", a) for a in argv]
            return await trio.run_process(
                argv, env=env, capture_stdout=True, capture_stderr=True, check=False
            )

        health = await run(service["healthcheck"]["test"][1:])
        assert health.returncode == 0, health.stderr
        first_user = shlex.split(
            _documented(r"^docker compose exec broker-secured (broker client users scram set .*)$")
        )
        created = await run(first_user)
        assert created.returncode == 0, created.stderr
        properties = _documented(r"(?s)```properties\n(.*?)```")
        config = tmp_path / "client.properties"
        config.write_text(properties.replace("secrets/ca.pem", str(secrets_dir / "ca.pem")))
        base = ["broker", "client", "--command-config", str(config), "-b", "localhost:9093"]
        answer = await run([*base, "metadata", "--json"])
        assert answer.returncode == 0, answer.stderr
        brokers = json.loads(answer.stdout)["brokers"]
        assert [(b["host"], b["port"]) for b in brokers] == [("localhost", external)]
        refused = await run([*base, "-X", "sasl.password=wrong", "metadata"])
        assert refused.returncode == 1 and b"failed" in refused.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, log_path.read_text()
