"""Connection admission rules (spec §3.4): blocking limits, rate delays, per-IP rejection."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.config import BrokerConfig
from broker.net.connection_quotas import ConnectionQuotas

TWO_LISTENERS = {
    "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def quotas(raw: dict[str, str], *listeners: str) -> ConnectionQuotas:
    q = ConnectionQuotas(BrokerConfig(raw))
    for name in listeners or ("PLAINTEXT",):
        q.add_listener(name)
    return q


async def connect(q: ConnectionQuotas, listener: str = "PLAINTEXT", ip: str = "10.0.0.1") -> bool:
    await q.wait_for_slot(listener)
    return q.admit(listener, ip)


async def test_counts_return_to_zero_after_release() -> None:
    q = quotas({})
    for ip in ("10.0.0.1", "10.0.0.1", "10.0.0.2"):
        assert await connect(q, ip=ip)
    assert (q.total_count(), q.listener_count("PLAINTEXT"), q.ip_count("10.0.0.1")) == (3, 3, 2)
    for ip in ("10.0.0.1", "10.0.0.1", "10.0.0.2"):
        q.release("PLAINTEXT", ip)
    assert (q.total_count(), q.listener_count("PLAINTEXT"), q.ip_count("10.0.0.1")) == (0, 0, 0)


async def test_releasing_an_unknown_connection_is_a_bug() -> None:
    with pytest.raises(ValueError):
        quotas({}).release("PLAINTEXT", "10.0.0.9")


async def test_waiting_blocks_at_max_connections_until_a_release(autojump_clock: object) -> None:
    q = quotas({"max.connections": "2"})
    assert await connect(q)
    assert await connect(q)
    admitted = trio.Event()
    blocked_for: list[float] = []

    async def third() -> None:
        blocked_for.append(await q.wait_for_slot("PLAINTEXT"))
        q.admit("PLAINTEXT", "10.0.0.1")
        admitted.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(third)
        await trio.sleep(5)
        assert not admitted.is_set()
        q.release("PLAINTEXT", "10.0.0.1")
        await admitted.wait()
    assert blocked_for[0] == pytest.approx(5, abs=0.01)
    assert q.total_count() == 2


async def test_listener_max_connections_blocks_only_that_listener(autojump_clock: object) -> None:
    q = quotas(
        {**TWO_LISTENERS, "listener.name.plaintext.max.connections": "1"}, "PLAINTEXT", "INTERNAL"
    )
    assert await connect(q, "PLAINTEXT")
    assert not q.slot_available("PLAINTEXT")
    assert q.slot_available("INTERNAL")
    with trio.move_on_after(10) as scope:
        await q.wait_for_slot("PLAINTEXT")
    assert scope.cancelled_caught


async def test_update_config_wakes_blocked_acceptors(autojump_clock: object) -> None:
    config = BrokerConfig({"max.connections": "1"})
    q = ConnectionQuotas(config)
    q.add_listener("PLAINTEXT")
    assert await connect(q)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(q.wait_for_slot, "PLAINTEXT")
        await trio.sleep(1)
        q.update_config(config.with_updates({"max.connections": "2"}))
    assert trio.current_time() == pytest.approx(1, abs=0.01)


async def test_protected_listener_is_exempt_from_the_broker_limit(autojump_clock: object) -> None:
    q = quotas({**TWO_LISTENERS, "max.connections": "1"}, "PLAINTEXT", "INTERNAL")
    assert q.is_protected("INTERNAL")
    assert not q.is_protected("PLAINTEXT")
    assert await connect(q, "PLAINTEXT")
    with trio.fail_after(0.5):
        assert await connect(q, "INTERNAL")
    assert q.total_count() == 2
    assert q.max_connections_exceeded()
    assert q.max_connections_exceeded("PLAINTEXT")
    assert not q.max_connections_exceeded("INTERNAL")


async def test_inter_broker_listener_is_not_protected_when_alone() -> None:
    q = quotas({})
    assert not q.is_protected("PLAINTEXT")


async def test_creation_rate_delays_the_acceptor(autojump_clock: object) -> None:
    q = quotas({"max.connection.creation.rate": "5"})
    start = trio.current_time()
    for _ in range(60):
        assert await connect(q)
        q.release("PLAINTEXT", "10.0.0.1")
    elapsed = trio.current_time() - start
    # 60 connections at <= 5/s over a sliding 11 s window cannot take much less
    # than 60/5 = 12 s minus the initial window credit.
    assert elapsed >= 60 / 5 - 11 * 1.0 - 0.1
    assert elapsed > 1.0


async def test_a_rate_delay_never_exceeds_one_quota_window(autojump_clock: object) -> None:
    q = quotas({"max.connection.creation.rate": "1"})
    for _ in range(50):
        blocked = await q.wait_for_slot("PLAINTEXT")
        assert blocked <= 1.0 + 1e-9


async def test_listener_creation_rate_applies_to_that_listener(autojump_clock: object) -> None:
    raw = {**TWO_LISTENERS, "listener.name.plaintext.max.connection.creation.rate": "1"}
    q = quotas(raw, "PLAINTEXT", "INTERNAL")
    delays_internal = [await q.wait_for_slot("INTERNAL") for _ in range(30)]
    assert max(delays_internal) == 0
    delays_plain = [await q.wait_for_slot("PLAINTEXT") for _ in range(30)]
    assert max(delays_plain) > 0


async def test_protected_listener_ignores_the_broker_creation_rate(autojump_clock: object) -> None:
    # The listener rate defaults to the broker value (Kafka's prefix override), so
    # INTERNAL keeps its own budget; only the broker-wide sensor is skipped.
    q = quotas({**TWO_LISTENERS, "max.connection.creation.rate": "2"}, "PLAINTEXT", "INTERNAL")
    plain = [await q.wait_for_slot("PLAINTEXT") for _ in range(30)]
    assert max(plain) > 0
    assert await q.wait_for_slot("INTERNAL") == 0


async def test_listener_creation_rate_defaults_to_the_broker_value(autojump_clock: object) -> None:
    q = quotas({**TWO_LISTENERS, "max.connection.creation.rate": "1"}, "PLAINTEXT", "INTERNAL")
    delays = [await q.wait_for_slot("INTERNAL") for _ in range(30)]
    assert max(delays) > 0


async def test_per_ip_limit_rejects_and_leaves_counts_unchanged() -> None:
    q = quotas({"max.connections.per.ip": "2"})
    assert await connect(q)
    assert await connect(q)
    assert not await connect(q)
    assert q.ip_count("10.0.0.1") == 2
    assert q.total_count() == 2
    assert q.listener_count("PLAINTEXT") == 2
    assert await connect(q, ip="10.0.0.2")


async def test_per_ip_overrides_take_precedence() -> None:
    q = quotas(
        {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "10.0.0.1:1,::1:2"}
    )
    assert q.ip_limit("10.0.0.1") == 1
    assert await connect(q)
    assert not await connect(q)
    assert not await connect(q, ip="10.0.0.2")
    assert await connect(q, ip="0:0::1")
    assert await connect(q, ip="::1")
    assert not await connect(q, ip="::1")


async def test_hostname_overrides_are_resolved() -> None:
    q = quotas({"max.connections.per.ip.overrides": "localhost:1"})
    assert q.ip_limit("127.0.0.1") == 1


async def test_ipv4_mapped_addresses_count_as_ipv4() -> None:
    q = quotas({"max.connections.per.ip": "1"})
    assert await connect(q, ip="::ffff:10.0.0.1")
    assert not await connect(q, ip="10.0.0.1")


async def test_unknown_listeners_are_refused() -> None:
    q = quotas({})
    with pytest.raises(KeyError):
        await q.wait_for_slot("OTHER")
    with pytest.raises(ValueError):
        q.add_listener("plaintext")
    q.remove_listener("PLAINTEXT")
    with pytest.raises(KeyError):
        q.admit("PLAINTEXT", "10.0.0.1")
