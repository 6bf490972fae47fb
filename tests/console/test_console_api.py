"""The console's JSON endpoints over its real HTTP port (hypercorn), against a broker."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from confluent_kafka import Producer

from broker.client.cli import main as client_main
from broker.console.transaction_states import TransactionStates
from tests.console.console_harness import (
    SECURED,
    admin_cli,
    allow,
    console_broker,
    produce_plain,
    produce_transaction,
)


async def _ok(response: httpx.Response) -> dict:  # type: ignore[type-arg]
    assert response.status_code == 200, response.text
    body: dict = response.json()  # type: ignore[type-arg]
    return body


async def test_topics_messages_and_groups_round_trip_through_the_console(tmp_path: Path) -> None:
    async with console_broker(tmp_path) as (server, http):
        session = await _ok(await http.get("/console/api/session"))
        assert session == {"login_required": False, "principal": "ANONYMOUS"}
        page = await http.get("/console/")
        assert page.status_code == 200 and "console.js" in page.text
        assert (await http.get("/console/static/console.js")).status_code == 200

        created = await http.post("/console/api/topics", json={"name": "orders", "partitions": 2})
        assert (await _ok(created)) == {"created": "orders"}
        listed = await _ok(await http.get("/console/api/topics"))
        (orders,) = [t for t in listed["topics"] if t["name"] == "orders"]
        assert orders["partitions"] == 2 and orders["configs"]["cleanup.policy"] == "delete"
        assert listed["permissions"]["create_topics"] is True

        for value in ('{"id": 1, "item": "tea"}', "plain text"):
            produced = await http.post(
                "/console/api/topics/orders/messages",
                json={
                    "partition": 1,
                    "key": "k1",
                    "value": value,
                    "headers": [{"key": "h", "value": "v"}],
                },
            )
            assert "offset" in await _ok(produced)
        browsed = await _ok(await http.get("/console/api/topics/orders/messages?partition=1"))
        assert [r["offset"] for r in browsed["records"]] == [1, 0]  # newest first
        newest, oldest = browsed["records"]
        assert newest["value"] == {"format": "text", "text": "plain text", "size": 10}
        assert oldest["value"]["format"] == "json" and '"item": "tea"' in oldest["value"]["text"]
        assert oldest["headers"] == [
            {"key": "h", "value": {"format": "text", "text": "v", "size": 1}}
        ]
        filtered = await _ok(
            await http.get(
                "/console/api/topics/orders/messages?partition=1&order=oldest&contains=tea"
            )
        )
        assert [r["offset"] for r in filtered["records"]] == [0]

        url = "/console/api/topics/orders/messages?partition=1&order=oldest&timestamp="
        since = await _ok(await http.get(url + str(oldest["timestamp"])))
        assert [r["offset"] for r in since["records"]] == [0, 1]
        later = await _ok(await http.get(url + str(newest["timestamp"] + 3_600_000)))
        assert later["records"] == []
        beyond = await http.get("/console/api/topics/orders/messages?partition=1&offset=99")
        assert beyond.status_code == 400 and "beyond the end" in beyond.json()["error"]
        malformed = await http.get("/console/api/topics/orders/messages?partition=x")
        assert malformed.status_code == 400 and "whole number" in malformed.json()["error"]

        described = await _ok(await http.get("/console/api/topics/orders"))
        assert [(p["partition"], p["end_offset"]) for p in described["partitions"]] == [
            (0, 0),
            (1, 2),
        ]
        assert await _ok(
            await http.post("/console/api/topics/orders/partitions", json={"count": 3})
        )
        altered = await http.post(
            "/console/api/topics/orders/configs", json={"set": {"retention.ms": "60000"}}
        )
        await _ok(altered)
        described = await _ok(await http.get("/console/api/topics/orders"))
        assert len(described["partitions"]) == 3 and described["configs"]["retention.ms"] == "60000"
        health = (await _ok(await http.get("/console/api/overview")))["partitions"]
        assert health == {"total": 3, "under_replicated": 0, "offline": 0}

        # A group that consumed partition 1 up to offset 1: lag 1, then reset to the end.
        code = await trio.to_thread.run_sync(
            client_main,
            [
                "-b",
                f"127.0.0.1:{server.bound_port()}",
                "consume",
                "orders",
                "-g",
                "readers",
                "--from-beginning",
                "-e",
                "-c",
                "1",
                "-p",
                "1",
            ],
        )
        assert code == 0
        groups = await _ok(await http.get("/console/api/groups"))
        assert "readers" in [g["group_id"] for g in groups["groups"]]
        group = await _ok(await http.get("/console/api/groups/readers"))
        assert [(o["partition"], o["lag"]) for o in group["offsets"]] == [(1, 1)]
        assert group["permissions"] == {"reset": True, "delete": True}
        reset = await http.post(
            "/console/api/groups/readers/reset", json={"topic": "orders", "to": "latest"}
        )
        assert (await _ok(reset))["offsets"] == {"1": 2}
        group = await _ok(await http.get("/console/api/groups/readers"))
        assert group["total_lag"] == 0 and len(group["lag_history"]) >= 1
        await _ok(await http.delete("/console/api/groups/readers"))
        missing = await http.get("/console/api/groups/no%2Fsuch")  # a group id may hold a /
        assert missing.status_code == 400 and "'no/such' does not exist" in missing.text

        refused = await http.delete("/console/api/topics/orders")
        assert refused.status_code == 400 and "confirm" in refused.json()["error"]
        await _ok(await http.delete("/console/api/topics/orders?confirm=orders"))
        listed = await _ok(await http.get("/console/api/topics"))
        assert "orders" not in [t["name"] for t in listed["topics"]]

        overview = await _ok(await http.get("/console/api/overview"))
        assert [b["node_id"] for b in overview["brokers"]] == [server.node_id]
        assert overview["brokers"][0]["up_since"] > 0
        huge = await http.post("/console/api/topics", json={"name": "big", "partitions": 10**12})
        assert huge.status_code == 400 and huge.json() == {"error": "partitions is out of range"}
        assert "Produce" in [r["api"] for r in overview["requests"]]
        metrics = await http.get("/metrics")
        assert 'node="1"' in metrics.text


async def test_a_principal_sees_only_the_topics_it_may_describe(tmp_path: Path) -> None:
    async with console_broker(tmp_path, SECURED) as (server, http):
        for user in ("admin", "alice"):
            await trio.to_thread.run_sync(
                admin_cli, server, "users", "scram", "set", user, "--password", f"{user}-secret"
            )
        for topic in ("public", "secret"):
            await trio.to_thread.run_sync(admin_cli, server, "topics", "create", topic)
            await trio.to_thread.run_sync(
                functools.partial(
                    admin_cli, server, "produce", topic, stdin=f"{topic}-record\n".encode()
                )
            )
        alice = "User:alice"
        await trio.to_thread.run_sync(allow, server, alice, "--topic", "public", "Read", "Describe")
        await trio.to_thread.run_sync(allow, server, alice, "--group", "readers", "Describe")
        consume = ("consume", "public", "-g", "readers", "--from-beginning", "-e", "-c", "1")
        await trio.to_thread.run_sync(admin_cli, server, *consume)
        assert (await http.get("/console/api/topics")).status_code == 401
        assert (await _ok(await http.get("/console/api/session")))["login_required"] is True
        wrong = await http.post(
            "/console/api/login", json={"username": "alice", "password": "nope"}
        )
        assert wrong.status_code == 401 and wrong.json() == {"error": "wrong user name or password"}
        assert (await http.get("/console/api/topics")).status_code == 401

        await _ok(
            await http.post(
                "/console/api/login", json={"username": "alice", "password": "alice-secret"}
            )
        )
        listed = await _ok(await http.get("/console/api/topics"))
        assert [t["name"] for t in listed["topics"]] == ["public"]
        assert listed["permissions"]["create_topics"] is False
        public = await _ok(await http.get("/console/api/topics/public"))
        assert public["permissions"]["read"] is True and public["permissions"]["write"] is False
        group = await _ok(await http.get("/console/api/groups/readers"))
        assert group["permissions"] == {"reset": False, "delete": False}
        messages = await _ok(await http.get("/console/api/topics/public/messages?partition=0"))
        assert [r["value"]["text"] for r in messages["records"]] == ["public-record"]
        hidden = await http.get("/console/api/topics/secret/messages?partition=0")
        assert hidden.status_code == 400 and "secret-record" not in hidden.text
        described = await http.get("/console/api/topics/secret")
        assert described.status_code == 400 and "AUTHORIZATION_FAILED" in described.text
        security = await _ok(await http.get("/console/api/security"))
        assert security["may_alter"] is False and security["may_alter_quotas"] is False
        assert "AUTHORIZATION_FAILED" in security["users"]["error"]
        assert "AUTHORIZATION_FAILED" in security["acls"]["error"]
        refused_user = await http.post(
            "/console/api/security/users", json={"user": "mallory", "password": "x"}
        )
        assert refused_user.status_code == 400 and "AUTHORIZATION_FAILED" in refused_user.text
        created = await http.post("/console/api/topics", json={"name": "mine"})
        assert created.status_code == 400 and "AUTHORIZATION_FAILED" in created.text
        await _ok(await http.post("/console/api/logout"))
        assert (await http.get("/console/api/topics")).status_code == 401

        await _ok(
            await http.post(
                "/console/api/login", json={"username": "admin", "password": "admin-secret"}
            )
        )
        listed = await _ok(await http.get("/console/api/topics"))
        assert [t["name"] for t in listed["topics"]] == ["public", "secret"]

        security = await _ok(await http.get("/console/api/security"))
        assert security["may_alter"] is True and security["may_alter_quotas"] is True
        group = await _ok(await http.get("/console/api/groups/readers"))
        assert group["permissions"] == {"reset": True, "delete": True}
        assert [u["user"] for u in security["users"]["rows"]] == ["admin", "alice"]
        acl = {
            "principal": "User:bob",
            "operation": "Read",
            "resource_type": "topic",
            "resource_name": "public",
        }
        await _ok(await http.post("/console/api/security/acls", json=acl))
        quota = {"entity_type": "user", "entity_name": "bob", "key": "producer_byte_rate"}
        await _ok(await http.post("/console/api/security/quotas", json={**quota, "value": "1024"}))
        await _ok(
            await http.post("/console/api/security/users", json={"user": "bob", "password": "pw"})
        )
        security = await _ok(await http.get("/console/api/security"))
        assert {
            "principal": "User:bob",
            "operation": "READ",
            "resource_name": "public",
        }.items() <= {
            k: v
            for a in security["acls"]["rows"]
            if a["principal"] == "User:bob"
            for k, v in a.items()
        }.items()
        both = {"entity": {"user": "bob", "client-id": "app"}, "key": "consumer_byte_rate"}
        await _ok(await http.post("/console/api/security/quotas", json={**both, "value": 2048}))
        security = await _ok(await http.get("/console/api/security"))
        rows = sorted(security["quotas"]["rows"], key=lambda q: len(q["entity"]))
        assert rows == [
            {"entity": {"user": "bob"}, "values": {"producer_byte_rate": 1024.0}},
            {
                "entity": {"user": "bob", "client-id": "app"},
                "values": {"consumer_byte_rate": 2048.0},
            },
        ]
        assert "bob" in [u["user"] for u in security["users"]["rows"]]
        unconfirmed = await http.delete("/console/api/security/users/bob")
        assert unconfirmed.status_code == 400 and "confirm" in unconfirmed.json()["error"]
        deleted = await _ok(await http.delete("/console/api/security/users/bob?confirm=bob"))
        assert deleted == {"deleted": "bob", "mechanisms": ["SCRAM-SHA-256"]}
        security = await _ok(await http.get("/console/api/security"))
        assert [u["user"] for u in security["users"]["rows"]] == ["admin", "alice"]
        again = await http.delete("/console/api/security/users/bob?confirm=bob")
        assert again.status_code == 400 and "no SCRAM credentials" in again.json()["error"]
        bad = await http.post("/console/api/security/acls", json={**acl, "operation": "Fly"})
        assert bad.status_code == 400 and "operation must be one of" in bad.json()["error"]
        removed = await _ok(await http.post("/console/api/security/acls/remove", json=acl))
        assert removed == {"removed": 1}


def _transactions(bootstrap: str) -> Producer:
    """A plain record, a big aborted transaction, a committed and an aborted small one,
    and an open one (its producer returned, to end it later)."""
    produce_plain(bootstrap, "payments", b"plain")
    # Far more than one Fetch's 1 MiB: its abort marker lies beyond the first read.
    big = [b"big-0"] + [b"x" * 100_000] * 19
    produce_transaction(bootstrap, "payments", "big", big, commit=False)
    produce_transaction(bootstrap, "payments", "paid", [b"paid"], commit=True)
    produce_transaction(bootstrap, "payments", "cancelled", [b"cancelled"], commit=False)
    return produce_transaction(bootstrap, "payments", "pending", [b"pending"], commit=None)


def _states(browsed: dict) -> list[tuple[str, str | None]]:  # type: ignore[type-arg]
    return [
        (r["value"]["text"][:10], r["transaction"] and r["transaction"]["state"])
        for r in browsed["records"]
    ]


async def test_messages_show_whether_each_record_was_committed_aborted_or_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: list[int] = []
    decide = TransactionStates.decide

    def counting(self: TransactionStates, offset: int, *args: Any) -> str:
        decided.append(offset)
        return decide(self, offset, *args)

    monkeypatch.setattr(TransactionStates, "decide", counting)
    async with console_broker(tmp_path) as (server, http):
        await _ok(await http.post("/console/api/topics", json={"name": "payments"}))
        bootstrap = f"127.0.0.1:{server.bound_port()}"
        pending = await trio.to_thread.run_sync(_transactions, bootstrap)
        url = "/console/api/topics/payments/messages"
        try:
            newest = await _ok(await http.get(url + "?limit=4"))
            assert _states(newest) == [
                ("pending", "open"),
                ("cancelled", "aborted"),
                ("paid", "committed"),
                ("x" * 10, "aborted"),
            ]
            assert newest["last_stable_offset"] == newest["records"][0]["offset"]
            # The first read of offset 1 holds only the start of the big transaction: the
            # aborted transactions of a READ_COMMITTED Fetch decide.
            oldest = await _ok(await http.get(url + "?offset=0&order=oldest&limit=2"))
            assert _states(oldest) == [("plain", None), ("big-0", "aborted")]
            assert decided == [1]
            assert oldest["records"][1]["transaction"]["producer_id"] >= 0
        finally:
            await trio.to_thread.run_sync(pending.abort_transaction, 20)
        newest = await _ok(await http.get(url + "?limit=1"))
        assert _states(newest) == [("pending", "aborted")]
