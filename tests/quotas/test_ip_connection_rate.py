"""The per-IP connection_creation_rate quota in ConnectionQuotas (spec §3.4, step 2),
under Trio's autojump clock: which connections are held, for how long, and that a
held one is taken back out of the broker's rates."""

from __future__ import annotations

import trio

from broker.config import BrokerConfig
from broker.net.connection_quotas import ConnectionQuotas


def quotas(raw: dict[str, str] | None = None) -> ConnectionQuotas:
    q = ConnectionQuotas(BrokerConfig({"quota.window.num": "2", **(raw or {})}))
    q.add_listener("PLAINTEXT")
    return q


async def test_no_ip_quota_means_no_delay(autojump_clock: trio.abc.Clock) -> None:
    q = quotas()
    assert all(q.ip_connection_throttle_s("PLAINTEXT", "10.0.0.1") == 0 for _ in range(100))


async def test_connections_over_the_rate_are_held_for_at_most_one_window(
    autojump_clock: trio.abc.Clock,
) -> None:
    q = quotas()
    q.update_ip_connection_rate_quota("10.0.0.1", 2)
    delays = [q.ip_connection_throttle_s("PLAINTEXT", "10.0.0.1") for _ in range(5)]
    assert delays[:2] == [0.0, 0.0]
    assert all(0 < d <= 1.0 for d in delays[2:])
    # Held connections are not counted, so each later one waits as long as the first.
    assert len(set(delays[2:])) == 1
    # Once the admitted ones' window has expired (quota.window.num windows), the IP
    # may connect again.
    await trio.sleep(2.0)
    assert q.ip_connection_throttle_s("PLAINTEXT", "10.0.0.1") == 0.0


async def test_the_default_applies_to_ips_without_their_own(
    autojump_clock: trio.abc.Clock,
) -> None:
    q = quotas()
    q.update_ip_connection_rate_quota(None, 1)
    q.update_ip_connection_rate_quota("10.0.0.2", 100)
    assert q.ip_connection_rate_quota("10.0.0.1") == 1
    assert q.ip_connection_rate_quota("::ffff:10.0.0.2") == 100
    assert [q.ip_connection_throttle_s("PLAINTEXT", "10.0.0.2") for _ in range(5)] == [0.0] * 5
    q.update_ip_connection_rate_quota(None, None)
    assert q.ip_connection_rate_quota("10.0.0.1") is None


async def test_a_held_connection_does_not_use_up_the_broker_rate(
    autojump_clock: trio.abc.Clock,
) -> None:
    q = quotas({"max.connection.creation.rate": "3"})
    q.update_ip_connection_rate_quota("10.0.0.1", 1)
    for _ in range(3):  # admitted by the broker rate, all but the first held per IP
        await q.wait_for_slot("PLAINTEXT")
        q.ip_connection_throttle_s("PLAINTEXT", "10.0.0.1")
    # Another IP is not slowed by the held ones: the broker rate only counts one.
    assert await q.wait_for_slot("PLAINTEXT") == 0.0
