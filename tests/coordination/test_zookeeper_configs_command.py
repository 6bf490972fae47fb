"""`broker zookeeper-configs` writes a SCRAM user into ZooKeeper before any broker starts,
as `kafka-configs.sh --zookeeper` does; a broker among hosts started afterwards logs the
user in and takes the brokers' default written the same way. The password is neither
stored nor printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from broker.client.security_config import SASL_PLAINTEXT, SaslCredentials, SecurityConfig
from broker.client.session import ClientError, ClientSession
from broker.hosts.zookeeper_configs_command import (
    ConfigsCommandError,
    main,
    split_config_list,
)
from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.protocol.messages import MetadataRequest
from tests.integration.broker_harness import running_broker

WAIT_S = 30
PASSWORD = "admin-secret"


def configs_command(zookeeper_connect: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "broker", "zookeeper-configs"]
    return subprocess.run(
        [*command, "--zookeeper", zookeeper_connect, *arguments],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )


def test_a_config_list_keeps_commas_inside_brackets_and_refuses_what_is_not_a_pair() -> None:
    assert split_config_list("SCRAM-SHA-256=[iterations=8192,password=p],b=2") == {
        "SCRAM-SHA-256": "[iterations=8192,password=p]",
        "b": "2",
    }
    for bad in ("a", "a=[1", "a=1]", "=1"):
        with pytest.raises(ConfigsCommandError):
            split_config_list(bad)


async def test_a_user_written_before_the_broker_starts_logs_in(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    user = ("--entity-type", "users", "--entity-name", "admin")
    scram = f"SCRAM-SHA-256=[iterations=8192,password={PASSWORD}]"
    written = configs_command(zookeeper_connect, "--alter", *user, "--add-config", scram)
    assert written.returncode == 0, written.stderr
    assert "user-principal 'admin'" in written.stdout and PASSWORD not in written.stdout
    # The rest in this process (the same `main`): a SCRAM-SHA-512 credential added and
    # deleted again, the 256 one staying; the brokers' default, as `kafka-configs.sh
    # --zookeeper --entity-type brokers --entity-default` writes it (the broker below
    # starts with 2 I/O threads and takes 3); refusals.
    scram_512 = f"SCRAM-SHA-512=[password={PASSWORD}]"
    brokers = ("--entity-type", "brokers", "--entity-default")
    for arguments, code in (
        (["--alter", *user, "--add-config", scram_512], 0),
        (["--alter", *user, "--delete-config", "SCRAM-SHA-512"], 0),
        (["--alter", *brokers, "--add-config", "num.io.threads=3"], 0),
        (["--alter", *user, "--add-config", "SCRAM-SHA-256=[iterations=9]"], 1),
        (["--alter", *brokers, "--add-config", "ssl.keystore.password=x"], 1),
        (["--alter", *brokers, "--add-config", "log.retention.ms=1"], 1),
        (["--alter", *brokers, "--add-config", "num.io.threads=a"], 1),
    ):
        arguments = ["--zookeeper", zookeeper_connect, *arguments]
        assert await trio.to_thread.run_sync(main, arguments) == code, arguments
    described = configs_command(zookeeper_connect, "--describe", "--entity-type", "users")
    assert described.returncode == 0, described.stderr
    assert "Configs for user-principal 'admin' are SCRAM-SHA-256=salt=" in described.stdout
    assert "iterations=8192" in described.stdout and "SCRAM-SHA-512" not in described.stdout

    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "security.inter.broker.protocol": SASL_PLAINTEXT,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{PASSWORD}";'
        ),
        "zookeeper.connect": zookeeper_connect,
        "node.id": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
    }
    async with running_broker(tmp_path, overrides, deployment=ZooKeeperDeployment) as server:
        bootstrap = f"127.0.0.1:{server.bound_port()}"
        with trio.fail_after(WAIT_S):
            for _ in range(int(WAIT_S / 0.1)):  # the broker registers once it listens
                if await registered_brokers(bootstrap, PASSWORD):
                    break
                await trio.sleep(0.1)
            with pytest.raises(ClientError, match="invalid credentials"):
                await registered_brokers(bootstrap, "not-the-password")
            await server.broker_configs.applied.wait_value(
                lambda _: server.broker_configs.value("num.io.threads") == "3"
            )


async def registered_brokers(bootstrap: str, password: str) -> list[int]:
    """Metadata's brokers, asked as admin logged in with `password`."""
    security = SecurityConfig(SASL_PLAINTEXT, SaslCredentials("SCRAM-SHA-256", "admin", password))
    async with await ClientSession.open(bootstrap, security=security) as session:
        request = MetadataRequest(topics=None)
        answer = await session.request(request, session.version_for(request.API_KEY))
    return [broker.node_id for broker in answer.brokers]
