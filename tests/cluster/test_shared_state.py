"""What the processes of a cluster share beyond topics: SCRAM users and client quotas made
through one process reach the others; every process offers the transaction APIs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from broker.client.cmd_quotas import alter_client_quotas, describe_client_quotas
from broker.client.session import ClientSession
from broker.cluster.shared_file import SharedFileFollower
from broker.protocol.api import ApiKey
from broker.protocol.messages import DescribeUserScramCredentialsRequest
from broker.security.scram_credentials import (
    CREDENTIALS_FILE,
    ScramCredential,
    ScramCredentialStore,
)
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.security.helpers import create_scram_user

TRANSACTION_APIS = {
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
}


def credential(iterations: int) -> ScramCredential:
    return ScramCredential(salt=b"s" * 16, stored_key=b"k", server_key=b"v", iterations=iterations)


async def test_a_stale_process_keeps_the_others_scram_change_and_follows_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / CREDENTIALS_FILE
    first, second = ScramCredentialStore(path), ScramCredentialStore(path)

    async def reload_first() -> None:
        first.reload()

    follower = SharedFileFollower(path, reload_first, poll_interval_s=0.01)
    await trio.to_thread.run_sync(first.apply, {("alice", "SCRAM-SHA-256"): credential(4096)}, [])
    assert second.get("alice", "SCRAM-SHA-256") is None  # not reloaded yet
    await trio.to_thread.run_sync(second.apply, {("bob", "SCRAM-SHA-256"): credential(8192)}, [])
    assert second.users() == ["alice", "bob"]  # built on the file, not on its stale memory
    assert first.users() == ["alice"]
    await follower.check()
    assert first.users() == ["alice", "bob"]
    assert first.mechanisms_of("bob") == [("SCRAM-SHA-256", 8192)]


async def test_a_change_made_before_the_follower_started_is_still_followed(
    tmp_path: Path,
) -> None:
    path = tmp_path / CREDENTIALS_FILE
    first, second = ScramCredentialStore(path), ScramCredentialStore(path)
    # `first` has loaded the file; another process changes it before `first` follows it.
    await trio.to_thread.run_sync(second.apply, {("bob", "SCRAM-SHA-256"): credential(8192)}, [])
    reloads = 0

    async def reload_first() -> None:
        nonlocal reloads
        reloads += 1
        first.reload()

    follower = SharedFileFollower(path, reload_first, poll_interval_s=0.01)
    await follower.check()
    assert first.users() == ["bob"]
    await follower.check()  # unchanged since: no second reload
    assert reloads == 1


async def test_only_a_real_change_is_logged_as_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / CREDENTIALS_FILE
    store = ScramCredentialStore(path)
    await trio.to_thread.run_sync(store.apply, {("bob", "SCRAM-SHA-256"): credential(8192)}, [])

    async def reload() -> None:
        store.reload()

    caplog.set_level(logging.INFO, logger="broker.cluster.shared_file")
    quiet = SharedFileFollower(path, reload, poll_interval_s=0.01)
    await quiet.check()  # the first check reloads, as a precaution: nothing changed
    assert "changed by another process" not in caplog.text
    followed = SharedFileFollower(path, reload, poll_interval_s=0.01)
    await trio.to_thread.run_sync(store.apply, {("eve", "SCRAM-SHA-256"): credential(4096)}, [])
    await followed.check()
    assert caplog.text.count(f"reloaded {path} changed by another process") == 1


async def test_users_and_quotas_made_through_one_process_reach_the_other(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", {"process.count": "2"})
    try:
        first, second = sorted(cluster.node_ports().values())
        async with (
            await ClientSession.open(f"127.0.0.1:{first}") as one,
            await ClientSession.open(f"127.0.0.1:{second}") as other,
        ):
            for session in (one, other):
                assert set(session.broker_versions) >= TRANSACTION_APIS
            await create_scram_user(one.connection, "carol", "carol-pw")
            await alter_client_quotas(one, [("user", "carol")], [("producer_byte_rate", 2048)])
            with trio.fail_after(20):
                while True:
                    users = await other.call(DescribeUserScramCredentialsRequest(users=None))
                    quotas = await describe_client_quotas(other, [("user", "carol")])
                    if [r.user for r in users.results] == ["carol"] and quotas:
                        break
                    await trio.sleep(0.05)
            assert quotas == [([("user", "carol")], {"producer_byte_rate": 2048.0})]
    finally:
        assert stop_broker_process(cluster) == 0, cluster.log_text()[-4000:]


async def test_quota_changes_made_at_once_through_two_processes_all_last(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", {"process.count": "2"})
    users = [f"user-{n}" for n in range(8)]

    async def alter(port: int, user: str, rate: int) -> None:
        async with await ClientSession.open(f"127.0.0.1:{port}") as session:
            await alter_client_quotas(session, [("user", user)], [("producer_byte_rate", rate)])

    try:
        ports = sorted(cluster.node_ports().values())
        async with trio.open_nursery() as nursery:
            for n, user in enumerate(users):
                nursery.start_soon(alter, ports[n % 2], user, 1000 + n)
        expected = sorted(
            (
                ([("user", user)], {"producer_byte_rate": float(1000 + n)})
                for n, user in enumerate(users)
            ),
            key=repr,
        )
        for port in ports:
            async with await ClientSession.open(f"127.0.0.1:{port}") as session:
                with trio.fail_after(20):
                    while True:
                        described = sorted(await describe_client_quotas(session, []), key=repr)
                        if described == expected:
                            break
                        await trio.sleep(0.05)
    finally:
        assert stop_broker_process(cluster) == 0, cluster.log_text()[-4000:]
