"""The supervisor of a host among hosts starts a process again only once its earlier
registration is gone (broker/cluster/zookeeper_registrations.py), on a real ZooKeeper."""

from __future__ import annotations

import trio

from broker.cluster.zookeeper_registrations import ZooKeeperRegistrations
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings

WAIT_S = 30
SESSION_TIMEOUT_MS = 1000
MARGIN_S = 0.5


async def registered_elsewhere(settings: ZooKeeperSettings, node: int) -> KazooCoordinationStore:
    """Another session holding `node`'s registration, as a broker process does."""
    session = KazooCoordinationStore(settings)
    await session.connect()
    await session.ensure_path("/brokers/ids")
    await session.create(f"/brokers/ids/{node}", b"{}", ephemeral=True)
    return session


async def test_a_registration_is_waited_for_until_its_session_ends(
    zookeeper_connect: str,
) -> None:
    settings = ZooKeeperSettings(zookeeper_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
    dead_process = await registered_elsewhere(settings, 7)
    registrations = ZooKeeperRegistrations(settings)
    await registrations.connect()
    try:
        assert await registrations.registration(7) is not None
        assert await registrations.registration(8) is None
        gone = trio.Event()

        async def wait() -> None:
            await registrations.wait_unregistered(7)
            gone.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(0.5)
            assert not gone.is_set()  # the registration is still there
            await dead_process.close()  # its session ends, the ephemeral znode with it
            with trio.fail_after(WAIT_S):
                await gone.wait()
        assert await registrations.registration(7) is None
        # Nothing to wait for: at once.
        with trio.fail_after(WAIT_S):
            await registrations.wait_unregistered(8)
    finally:
        await registrations.close()


async def test_a_registration_that_stays_is_waited_for_no_longer_than_a_session(
    zookeeper_connect: str,
) -> None:
    settings = ZooKeeperSettings(zookeeper_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
    other_broker = await registered_elsewhere(settings, 9)
    registrations = ZooKeeperRegistrations(settings, margin_s=MARGIN_S)
    await registrations.connect()
    try:
        started = trio.current_time()
        with trio.fail_after(WAIT_S):
            await registrations.wait_unregistered(9)
        waited = trio.current_time() - started
        assert waited >= SESSION_TIMEOUT_MS / 1000 + MARGIN_S - 0.1
        assert await registrations.registration(9) is not None  # a live broker's: still there
    finally:
        await registrations.close()
        await other_broker.close()
