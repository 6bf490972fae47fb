"""`broker client`'s admin commands on a two-process cluster, bootstrapped from one
process: each request must reach the process that can answer it (a group's or
transactional id's coordinator, a partition's leader, a broker's own process), which
for half of them is the other process."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import trio

from broker.client.admin_routing import TRANSACTION_KEY, coordinator_session
from broker.client.cli import main
from broker.client.group_offsets import fetch_committed
from broker.client.routing_session import RoutingSession
from broker.client.session import ClientSession
from broker.cluster.placement import coordinator_shard
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AddPartitionsToTxnRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
)
from broker.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.integration.data_helpers import produce_request
from tests.integration.test_transaction_apis import txn_batch


def run_client(bootstrap: str, args: list[str], stdin: bytes) -> bytes:
    """The command's output (in this process: a new one costs ~1.5 s of imports)."""
    out = io.TextIOWrapper(io.BytesIO(), write_through=True)
    err = io.StringIO()
    saved = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.TextIOWrapper(io.BytesIO(stdin)), out
    try:
        with contextlib.redirect_stderr(err):
            code = main([*args, "-b", bootstrap])
    finally:
        sys.stdin, sys.stdout = saved
    assert code == 0, err.getvalue()
    raw = out.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue()


def one_per_shard(prefix: str) -> list[str]:
    """Two names whose coordinators are the first and the second process."""
    names: dict[int, str] = {}
    for i in range(100):
        names.setdefault(coordinator_shard(f"{prefix}-{i}", 2), f"{prefix}-{i}")
    return [names[0], names[1]]


async def open_transaction(session: ClientSession, tid: str, partition: int) -> int:
    """A transaction left open on routed-`partition`; its producer id."""
    _, coordinator = await coordinator_session(session, tid, TRANSACTION_KEY)
    init = await coordinator.request(
        InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000), 4
    )
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    added = await coordinator.request(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name="routed", partitions=(partition,)),),
        ),
        3,
    )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    body = produce_request(
        "routed", {partition: txn_batch([b"t"], pid, epoch, 0)}, transactional_id=tid
    )
    produced = await session.request(body, 9)
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    return int(pid)


async def last_stable_offsets(
    session: ClientSession, topic: str, partitions: list[int]
) -> dict[int, int]:
    body = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1,  # read_committed: the last stable offset
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, timestamp=-1) for p in partitions
                ),
            ),
        ),
    )
    response = await session.request(body, 5)
    return {p.partition_index: p.offset for t in response.topics for p in t.partitions}


async def test_admin_commands_reach_the_coordinator_leader_or_broker_they_need(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(
        tmp_path / "data", {"process.count": "2", "group.initial.rebalance.delay.ms": "0"}
    )
    try:
        nodes = cluster.node_ports()
        bootstrap = f"127.0.0.1:{nodes[min(nodes)]}"

        async def client(*args: str, stdin: bytes = b"") -> Any:
            """The command's --json output (main() runs its own trio.run: in a thread)."""
            out = await trio.to_thread.run_sync(run_client, bootstrap, [*args, "--json"], stdin)
            return json.loads(out) if out.strip() else None

        await client("topics", "create", "routed", "--partitions", "2")
        leaders = {
            p["partition_index"]: p["leader_id"]
            for p in (await client("metadata", "routed"))["topics"][0]["partitions"]
        }
        assert set(leaders.values()) == set(nodes)  # one partition on each process
        for p in (0, 1):
            await client("produce", "routed", "-p", str(p), stdin=b"a\nb\nc\nd\n")

        assert await client("delete-records", "routed:0", "routed:1", "--before", "3") == [
            {"topic": "routed", "partition": 0, "low_watermark": 3},
            {"topic": "routed", "partition": 1, "low_watermark": 3},
        ]

        for node in nodes:
            await client(
                "configs",
                "alter",
                "--broker",
                str(node),
                "--add-config",
                f"max.connections={900 + node}",
            )
        for node in nodes:
            described = await client("configs", "describe", "--broker", str(node))
            assert ("max.connections", str(900 + node)) in [
                (e["name"], e["value"]) for e in described
            ]

        async with await RoutingSession.open(bootstrap) as session:
            for group in one_per_shard("grp"):
                await trio.to_thread.run_sync(
                    run_client,
                    bootstrap,
                    ["consume", "routed", "-g", group, "--from-beginning", "-e"],
                    b"",
                )
                assert await fetch_committed(session, group) == {("routed", 0): 4, ("routed", 1): 4}
                plan = await client(
                    "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"
                )
                assert [r["new_offset"] for r in plan["offsets"]] == [3, 3]
                assert await fetch_committed(session, group) == {("routed", 0): 3, ("routed", 1): 3}
                assert await client("groups", "delete", group) == [
                    {"group_id": group, "error": "NONE"}
                ]
                assert await fetch_committed(session, group) == {}

            tids = one_per_shard("txn")
            pids = {tid: await open_transaction(session, tid, p) for p, tid in enumerate(tids)}
            listed = await client("transactions", "list")
            assert {(t["transactional_id"], t["producer_id"], t["state"]) for t in listed} == {
                (tid, pid, "Ongoing") for tid, pid in pids.items()
            }
            assert len({t["coordinator"] for t in listed}) == 2
            for p, tid in enumerate(tids):
                described = await client("transactions", "describe", tid)
                assert described["topic_partitions"] == [f"routed-{p}"]
                aborted = await client(
                    "transactions",
                    "abort",
                    "--topic",
                    "routed",
                    "--partition",
                    str(p),
                    "--producer-id",
                    str(pids[tid]),
                )
                assert aborted["transaction_start_offset"] == 4
            stable = await last_stable_offsets(session, "routed", [0, 1])
            assert stable == {0: 6, 1: 6}  # 4 records, the transaction's, its ABORT marker
    finally:
        assert stop_broker_process(cluster) == 0
