"""The admin commands of `broker client` (topics alter, configs, groups reset-offsets and
delete, delete-records, transactions, perf) against a live broker: each command's effect
on the broker and its --json output. The commands run in-process, as in test_client.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.client.cli import build_parser
from broker.client.cmd_configs import parse_delete_configs, parse_set_configs
from broker.client.connection import KafkaConnection
from broker.client.group_member import GroupMember
from broker.client.group_offsets import fetch_committed
from broker.client.session import ClientSession
from broker.client.topics import describe_topic
from broker.protocol.error_codes import ErrorCode
from broker.server import KafkaServer
from tests.integration.broker_harness import connect, running_broker
from tests.integration.data_helpers import produce
from tests.integration.test_transaction_apis import add_partition, init, latest, txn_batch
from tests.product.test_client import Client


class AdminClient(Client):
    def __init__(self, server: KafkaServer) -> None:
        super().__init__(server)
        self.server = server

    async def json(self, *args: str) -> Any:
        return json.loads(await self.ok(*args, "--json"))

    async def fails(self, *args: str) -> str:
        result = await self.in_process(*args)
        assert result.code == 1, result.err
        return result.err

    async def session(self) -> ClientSession:
        return await ClientSession.open(self.bootstrap)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[AdminClient]:
    async with running_broker(tmp_path, {"group.initial.rebalance.delay.ms": "0"}) as server:
        yield AdminClient(server)


ADMIN_COMMANDS = [
    ["topics", "alter"],
    ["configs", "describe"],
    ["configs", "alter"],
    ["groups", "reset-offsets"],
    ["groups", "delete"],
    ["delete-records"],
    ["transactions", "list"],
    ["transactions", "describe"],
    ["transactions", "abort"],
    ["perf", "produce"],
    ["perf", "consume"],
]


def test_every_admin_command_has_help_with_an_example_and_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in ADMIN_COMMANDS:
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([*command, "--help"])
        out = capsys.readouterr().out
        assert exit_info.value.code == 0 and "example" in out and "--json" in out, command


def test_config_lists_keep_commas_inside_brackets_as_kafka_configs_does() -> None:
    assert parse_set_configs(["a=1,b=[x,y]", "c="]) == {"a": "1", "b": "x,y", "c": ""}
    assert parse_delete_configs(["a, b", "c"]) == ["a", "b", "c"]


def lines(n: int) -> bytes:
    return b"".join(b"record-%d\n" % i for i in range(n))


async def test_topics_alter_and_configs_describe_alter_change_the_broker(
    client: AdminClient,
) -> None:
    await client.ok("topics", "create", "orders")
    report = await client.json(
        "topics", "alter", "orders", "--partitions", "3", "--config", "retention.ms=60000"
    )
    assert report == {
        "resource": "topic orders",
        "set": {"retention.ms": "60000"},
        "deleted": [],
        "partitions": 3,
    }
    topic = client.server.log_manager.topic("orders")
    assert topic is not None and topic.num_partitions == 3
    assert topic.configs()["retention.ms"] == "60000"

    await client.ok(
        "configs",
        "alter",
        "--topic",
        "orders",
        "--add-config",
        "cleanup.policy=[delete],max.message.bytes=2048",
        "--delete-config",
        "retention.ms",
    )
    topic = client.server.log_manager.topic("orders")
    assert topic is not None and topic.configs() == {
        "cleanup.policy": "delete",
        "max.message.bytes": "2048",
    }
    dynamic = await client.json("configs", "describe", "--topic", "orders")
    assert [(e["name"], e["value"], e["source"]) for e in dynamic] == [
        ("cleanup.policy", "delete", "DYNAMIC_TOPIC_CONFIG"),
        ("max.message.bytes", "2048", "DYNAMIC_TOPIC_CONFIG"),
    ]
    everything = await client.json("configs", "describe", "--topic", "orders", "--all")
    assert {"name": "retention.ms", "source": "DEFAULT_CONFIG"}.items() <= next(
        e for e in everything if e["name"] == "retention.ms"
    ).items()

    node = str(client.server.node_id)
    await client.ok("configs", "alter", "--broker", node, "--add-config", "num.io.threads=3")
    assert client.server.broker_configs.value("num.io.threads") == "3"
    described = await client.json("configs", "describe", "--broker", node)
    assert {"name": "num.io.threads", "value": "3", "source": "DYNAMIC_BROKER_CONFIG"}.items() <= (
        described[0].items()
    )
    await client.ok("configs", "alter", "--broker-defaults", "--add-config", "max.connections=77")
    defaults = await client.json("configs", "describe", "--broker-defaults")
    assert [(e["name"], e["value"]) for e in defaults] == [("max.connections", "77")]
    err = await client.fails("topics", "alter", "orders", "--partitions", "2")
    assert "INVALID_PARTITIONS" in err
    err = await client.fails("configs", "alter", "--topic", "orders", "--add-config", "nope=1")
    assert "INVALID_CONFIG" in err or "UNKNOWN" in err


async def test_groups_reset_offsets_plans_then_executes_and_delete_removes_the_group(
    client: AdminClient,
) -> None:
    await client.ok("topics", "create", "events", "--partitions", "2")
    await client.ok("produce", "events", "-p", "0", stdin=lines(5))
    await client.ok("produce", "events", "-p", "1", stdin=lines(3))
    await client.ok("consume", "events", "-g", "billing", "--from-beginning", "-e")
    session = await client.session()
    async with session:
        assert await fetch_committed(session, "billing") == {("events", 0): 5, ("events", 1): 3}

        plan = await client.json(
            "groups", "reset-offsets", "billing", "--all-topics", "--to-earliest"
        )
        assert plan == {
            "group": "billing",
            "executed": False,
            "offsets": [
                {"topic": "events", "partition": 0, "current_offset": 5, "new_offset": 0},
                {"topic": "events", "partition": 1, "current_offset": 3, "new_offset": 0},
            ],
        }
        text = (
            await client.ok(
                "groups", "reset-offsets", "billing", "--topic", "events:1", "--shift-by", "-1"
            )
        ).decode()
        assert "dry run" in text and "billing" in text
        assert await fetch_committed(session, "billing") == {("events", 0): 5, ("events", 1): 3}

        await client.ok(
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "events:0",
            "--shift-by",
            "-2",
            "--execute",
        )
        await client.ok(
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "events:1",
            "--to-offset",
            "99",
            "--execute",
        )
        assert await fetch_committed(session, "billing") == {("events", 0): 3, ("events", 1): 3}
        future = await client.json(
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "events",
            "--to-datetime",
            "2999-01-01T00:00:00Z",
        )
        assert [r["new_offset"] for r in future["offsets"]] == [5, 3]

        info = await describe_topic(session, "events")
        member = GroupMember(session, "billing", info)
        await member.join()
        err = await client.fails(
            "groups", "reset-offsets", "billing", "--all-topics", "--to-latest", "--execute"
        )
        assert "inactive" in err and "Stable" in err
        err = await client.fails("groups", "delete", "billing")
        assert "billing (NON_EMPTY_GROUP)" in err
        await member.leave()

        assert await client.json("groups", "delete", "billing") == [
            {"group_id": "billing", "error": "NONE"}
        ]
        assert await fetch_committed(session, "billing") == {}


async def test_delete_records_moves_the_log_start_offset(client: AdminClient) -> None:
    await client.ok("topics", "create", "logs", "--partitions", "2")
    await client.ok("produce", "logs", "-p", "1", stdin=lines(10))
    assert await client.json("delete-records", "logs:1", "--before", "4") == [
        {"topic": "logs", "partition": 1, "low_watermark": 4}
    ]
    partition = client.server.log_manager.partition("logs", 1)
    assert partition is not None and partition.log_start_offset == 4
    out = await client.ok("consume", "logs", "-p", "1", "--from-beginning", "-e")
    assert out.splitlines() == [b"record-%d" % i for i in range(4, 10)]
    assert (
        "logs-1: low watermark 10"
        in (await client.ok("delete-records", "logs:1", "--before", "-1")).decode()
    )
    assert "OFFSET_OUT_OF_RANGE" in await client.fails("delete-records", "logs:0", "--before", "5")


async def _hanging_transaction(conn: KafkaConnection, topic: str) -> int:
    """A transaction left open on `topic`-0, as a producer that died would leave it."""
    pid, epoch = await init(conn, "stuck-txn")
    assert await add_partition(conn, "stuck-txn", pid, epoch, topic) == ErrorCode.NONE
    response = await produce(
        conn, topic, txn_batch([b"a", b"b"], pid, epoch, 0), transactional_id="stuck-txn"
    )
    assert response.error_code == ErrorCode.NONE
    return pid


async def test_transactions_list_describe_and_abort_a_hanging_transaction(
    client: AdminClient,
) -> None:
    await client.ok("topics", "create", "payments")
    async with await connect(client.server) as conn:
        pid = await _hanging_transaction(conn, "payments")
        assert await latest(conn, "payments", 1) == 0  # read_committed stops at the open txn

        listed = await client.json("transactions", "list")
        assert [(t["transactional_id"], t["producer_id"], t["state"]) for t in listed] == [
            ("stuck-txn", pid, "Ongoing")
        ]
        assert await client.json("transactions", "list", "--state", "CompleteCommit") == []
        described = await client.json("transactions", "describe", "stuck-txn")
        assert described["state"] == "Ongoing" and described["producer_id"] == pid
        assert described["topic_partitions"] == ["payments-0"]

        abort = ["transactions", "abort", "--topic", "payments", "--partition", "0"]
        err = await client.fails(*abort, "--start-offset", "1")
        assert "no open transaction starting at offset 1" in err
        aborted = await client.json(*abort, "--producer-id", str(pid))
        assert aborted["producer_id"] == pid and aborted["transaction_start_offset"] == 0
        partition = client.server.log_manager.partition("payments", 0)
        assert partition is not None and partition.open_transactions() == {}
        assert await latest(conn, "payments", 1) == 3  # two records and the ABORT marker
        out = await client.ok("consume", "payments", "--from-beginning", "-e")
        assert out == b"a\nb\n"  # read_uncommitted, as the client reads


async def test_perf_produce_and_consume_report_rates_and_latency(client: AdminClient) -> None:
    produced = await client.json(
        "perf",
        "produce",
        "load",
        "--num-records",
        "3000",
        "--record-size",
        "100",
        "--batch-size",
        "250",
        "--reporting-interval",
        "0",
    )
    assert produced["records"] == 3000 and produced["completed"] is True
    assert produced["records_per_sec"] > 0 and produced["mb_per_sec"] > 0
    assert 0 < produced["p50_ms"] <= produced["p95_ms"] <= produced["p99_ms"]
    assert produced["p99_ms"] <= produced["max_latency_ms"]
    partition = client.server.log_manager.partition("load", 0)
    assert partition is not None and partition.log_end_offset == 3000

    text = (
        await client.ok(
            "perf",
            "produce",
            "load",
            "--num-records",
            "40",
            "--record-size",
            "10",
            "--throughput",
            "200",
            "--reporting-interval",
            "0.05",
        )
    ).decode()
    assert "records sent" in text.splitlines()[0]  # a progress line
    assert "ms 50th" in text.splitlines()[-1] and "ms 99th" in text.splitlines()[-1]

    consumed = await client.json(
        "perf", "consume", "load", "--num-records", "3040", "--timeout", "5"
    )
    assert consumed["records"] == 3040 and consumed["completed"] is True
    assert consumed["mb"] == round((3000 * 100 + 40 * 10) / 1024 / 1024, 4)
    short = await client.json(
        "perf", "consume", "load", "--num-records", "5000", "--timeout", "0.5"
    )
    assert short["records"] == 3040 and short["completed"] is False
