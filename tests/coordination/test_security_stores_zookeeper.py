"""SCRAM credentials and ACLs of hosts on a real ZooKeeper: two brokers' stores (in one
process) follow each other's changes, and a broker's per-broker file is copied into a
ZooKeeper that holds none, never over what ZooKeeper holds."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.hosts import change_notifications
from broker.hosts.change_notifications import notify
from broker.hosts.zookeeper_acls import ZooKeeperAclStore
from broker.hosts.zookeeper_quotas import ZooKeeperQuotaStore
from broker.hosts.zookeeper_scram_credentials import ZooKeeperScramCredentials
from broker.quotas.client_quota_configs import QuotaOp
from broker.quotas.client_quota_entity import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaEntity,
)
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_store import AclStore
from broker.security.authorizer import StandardAuthorizer
from broker.security.scram_credentials import (
    CREDENTIALS_FILE,
    MECHANISM_BY_NAME,
    ScramCredential,
    ScramCredentialStore,
)

WAIT_S = 30
SHA256 = MECHANISM_BY_NAME["SCRAM-SHA-256"]


def credential(password: str) -> ScramCredential:
    return ScramCredential.from_password(SHA256, password, b"salt-of-" + password.encode(), 4096)


def binding(name: str, pattern_type: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, pattern_type),
        AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )


async def eventually(what: str, holds: Callable[[], bool]) -> None:
    for _ in range(int(WAIT_S / 0.05)):
        if holds():
            return
        await trio.sleep(0.05)
    raise AssertionError(f"not within {WAIT_S} s: {what}")


async def connected(zookeeper_connect: str) -> KazooCoordinationStore:
    store = KazooCoordinationStore(
        ZooKeeperSettings(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    )
    await store.connect()
    return store


async def test_credentials_follow_zookeeper_and_a_file_fills_only_an_empty_one(
    zookeeper_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    files = [tmp_path / f"broker-{n}" / CREDENTIALS_FILE for n in (1, 2)]
    ScramCredentialStore(files[0]).apply({("alice", SHA256.name): credential("a")}, ())
    ScramCredentialStore(files[1]).apply({("mallory", SHA256.name): credential("m")}, ())
    stores = [await connected(zookeeper_connect) for _ in files]
    try:
        first = ZooKeeperScramCredentials(files[0], stores[0])
        second = ZooKeeperScramCredentials(files[1], stores[1])
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            assert "ZooKeeper holds no SCRAM credential: copying the 1" in caplog.text
            await nursery.start(second.run)
            assert "the 1 in" in caplog.text and "are not used" in caplog.text
            assert second.get("alice", SHA256.name) == credential("a")
            assert second.get("mallory", SHA256.name) is None

            await second.alter({("bob", SHA256.name): credential("b")}, ())
            await eventually("bob on the first", lambda: first.users() == ["alice", "bob"])
            await first.alter({}, [("alice", SHA256.name)])
            await eventually("alice gone on the second", lambda: second.users() == ["bob"])
            assert second.mechanisms_of("bob") == [(SHA256.name, 4096)]
            nursery.cancel_scope.cancel()
    finally:
        for store in stores:
            await store.close()


async def test_acls_follow_zookeeper_and_a_file_fills_only_an_empty_one(
    zookeeper_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    dirs = [tmp_path / f"broker-{n}" for n in (1, 2)]
    AclStore(dirs[0]).save_sync([binding("orders"), binding("logs-", PatternType.PREFIXED)])
    AclStore(dirs[1]).save_sync([binding("secrets")])
    authorizers = [StandardAuthorizer(AclStore(d).load()) for d in dirs]
    stores = [await connected(zookeeper_connect) for _ in dirs]
    try:
        first, second = (
            ZooKeeperAclStore(d, s, a) for d, s, a in zip(dirs, stores, authorizers, strict=True)
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            assert "ZooKeeper holds no ACL: copying the 2" in caplog.text
            await nursery.start(second.run)
            assert "ACLs are read from ZooKeeper; the 1 in" in caplog.text
            expected = {binding("orders"), binding("logs-", PatternType.PREFIXED)}
            assert set(authorizers[1].bindings()) == expected

            async with second.lock:
                await second.save([*authorizers[1].bindings(), binding("payments")])
            expected.add(binding("payments"))
            await eventually(
                "payments on the first", lambda: set(authorizers[0].bindings()) == expected
            )
            async with first.lock:
                await first.save([binding("payments")])
            await eventually(
                "only payments on the second",
                lambda: set(authorizers[1].bindings()) == {binding("payments")},
            )

            # Two brokers change the same pattern at once: each change is applied to the
            # znode as the other left it, so neither is lost.
            carol = AclBinding(
                binding("payments").pattern,
                AccessControlEntry("User:carol", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            )
            async with second.lock:
                async with first.lock:
                    await first.save([*authorizers[0].bindings(), carol])
                await second.save([binding("orders")])  # payments' bob removed, orders added
            want = {carol, binding("orders")}
            await eventually(
                "both changes on the first", lambda: set(authorizers[0].bindings()) == want
            )
            await eventually("both on the second", lambda: set(authorizers[1].bindings()) == want)
            nursery.cancel_scope.cancel()
    finally:
        for store in stores:
            await store.close()


async def test_quotas_follow_zookeeper_beside_the_credentials_and_a_file_fills_an_empty_one(
    zookeeper_connect: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    dirs = [tmp_path / f"broker-{n}" for n in (1, 2)]
    alice = ClientQuotaEntity(((USER, "alice"),))
    QuotaStore(dirs[0]).save_sync([(alice, {PRODUCER_BYTE_RATE: 2048.0})])
    managers = [QuotaManagers(1.0, 2) for _ in dirs]
    stores = [await connected(zookeeper_connect) for _ in dirs]
    try:
        credentials = ZooKeeperScramCredentials(dirs[0] / CREDENTIALS_FILE, stores[0])
        first, second = (ZooKeeperQuotaStore(d, s) for d, s in zip(dirs, stores, strict=True))
        async with trio.open_nursery() as nursery:
            await nursery.start(credentials.run)
            await credentials.alter({("alice", SHA256.name): credential("a")}, ())
            await nursery.start(first.following(managers[0]).run)
            assert "ZooKeeper holds no client quota: copying the 1" in caplog.text
            await nursery.start(second.following(managers[1]).run)
            assert managers[1].configs.get(alice) == {PRODUCER_BYTE_RATE: 2048.0}

            default_client = ClientQuotaEntity(((CLIENT_ID, None),))
            stored = await second.update(
                {
                    alice: [
                        QuotaOp(PRODUCER_BYTE_RATE, remove=True),
                        QuotaOp(REQUEST_PERCENTAGE, 50.0),
                    ],
                    default_client: [QuotaOp(CONSUMER_BYTE_RATE, 4096.0)],
                }
            )
            expected = {
                alice: {REQUEST_PERCENTAGE: 50.0},
                default_client: {CONSUMER_BYTE_RATE: 4096.0},
            }
            assert stored == expected
            await eventually(
                "the first broker's quotas",
                lambda: dict(managers[0].configs) == expected,
            )
            # The user's znode still holds her credential beside her quota.
            await eventually("the credential kept", lambda: credentials.users() == ["alice"])
            assert credentials.get("alice", SHA256.name) == credential("a")
            nursery.cancel_scope.cancel()
    finally:
        for store in stores:
            await store.close()


async def test_only_the_newest_change_notifications_are_kept(
    zookeeper_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(change_notifications, "KEPT_NOTIFICATIONS", 3)
    store = await connected(zookeeper_connect)
    try:
        await store.ensure_path("/config/changes")
        for n in range(6):
            await notify(store, "/config/changes", "config_change_", str(n).encode())
        assert len(await store.children("/config/changes")) == 6
        await notify(store, "/config/changes", "config_change_", b"6")
        kept = sorted(await store.children("/config/changes"))
        data = [await store.get(f"/config/changes/{name}") for name in kept]
        assert [d.data for d in data if d is not None] == [b"4", b"5", b"6"]
    finally:
        await store.close()
