"""ElectLeaders on hosts coordinated through a real ZooKeeper: the preferred replica,
back and in sync, leads again when asked (through confluent-kafka's AdminClient), and an
UNCLEAN election brings an offline partition back under a live replica that was out of
the ISR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.connection import KafkaConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ElectLeadersRequest
from broker.protocol.messages.elect_leaders_request import TopicPartitions
from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.hosts.test_hosts_cluster import (
    HOSTS,
    WAIT_S,
    bootstrap,
    running_host,
    wait_for_metadata,
)

TOPIC = "elected"
ELECT_LEADERS_VERSION = 2


def elect_preferred(servers: str) -> dict[Any, Any]:
    admin = AdminClient({"bootstrap.servers": servers})
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)])
    result: dict[Any, Any] = future.result(timeout=WAIT_S)
    return result


def create_topic(servers: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])
    futures[TOPIC].result(timeout=WAIT_S)


async def elect(server: KafkaServer, election_type: int) -> tuple[int, str | None]:
    address = HOSTS[server.node_id][0]
    request = ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=(TopicPartitions(topic=TOPIC, partitions=(0,)),),
        timeout_ms=WAIT_S * 1000,
    )
    async with await KafkaConnection.connect(address, server.bound_port(), "t") as connection:
        response = await connection.request(request, ELECT_LEADERS_VERSION)
    (result,) = response.replica_election_results[0].partition_result
    return result.error_code, result.error_message


async def test_elect_leaders_moves_leadership_to_the_preferred_replica_and_uncleanly(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    servers: dict[int, KafkaServer] = {}
    stops: dict[int, trio.Event] = {}
    stopped: dict[int, trio.Event] = {}

    async def host(node_id: int, task_status: trio.TaskStatus[None]) -> None:
        """One host in its own task, so that hosts stop in any order."""
        stops[node_id], stopped[node_id] = trio.Event(), trio.Event()
        try:
            # Leadership moves here only when the test asks (ElectLeaders), not by the
            # controller's own preferred-leader rebalance.
            extra = {"auto.leader.rebalance.enable": "false"}
            async with running_host(tmp_path, node_id, zookeeper_connect, extra) as server:
                servers[node_id] = server
                task_status.started()
                await stops[node_id].wait()
        finally:
            servers.pop(node_id, None)
            stopped[node_id].set()

    async def start(node_id: int) -> None:
        await nursery.start(host, node_id)

    async def stop(node_id: int) -> None:
        stops[node_id].set()
        await stopped[node_id].wait()

    async def partition_where(server: KafkaServer, ready: Any) -> Any:
        response = await wait_for_metadata(
            server,
            TOPIC,
            lambda r: bool(r.topics[0].partitions) and ready(r.topics[0].partitions[0]),
        )
        return response.topics[0].partitions[0]

    async with trio.open_nursery() as nursery:
        for node_id in HOSTS:
            await start(node_id)
        await wait_for_metadata(servers[1], None, lambda r: len(r.brokers) == 3)
        await trio.to_thread.run_sync(create_topic, bootstrap(servers[1]))
        first = await partition_where(servers[1], lambda p: len(p.isr_nodes) == 3)
        preferred, second, third = first.replica_nodes
        assert first.leader_id == preferred
        # Nothing to elect while the preferred replica leads.
        assert (await elect(servers[second], 0))[0] == ErrorCode.ELECTION_NOT_NEEDED

        # The preferred replica's broker stops and comes back: another leads, and the
        # returning replica catches up into the ISR without taking leadership back.
        await stop(preferred)
        moved = await partition_where(servers[second], lambda p: p.leader_id not in (-1, preferred))
        await start(preferred)
        back = await partition_where(servers[second], lambda p: preferred in p.isr_nodes)
        assert back.leader_id == moved.leader_id != preferred
        outcome = await trio.to_thread.run_sync(elect_preferred, bootstrap(servers[second]))
        assert list(outcome.values()) == [None]  # no error for the partition
        for server in servers.values():
            await partition_where(server, lambda p: p.leader_id == preferred)
        again = ["elect-leaders", f"{TOPIC}:0", "-b", bootstrap(servers[third])]
        answered = await trio.to_thread.run_sync(run_cli, again)
        assert answered.code == 0, answered.err
        assert answered.out.decode() == f"{TOPIC}-0\tELECTION_NOT_NEEDED\n"

        # Unclean: the ISR narrowed to one replica whose broker then stops; a replica out of
        # the ISR returns and stays out of leadership until an UNCLEAN election is asked.
        await stop(third)
        await stop(second)
        await partition_where(servers[preferred], lambda p: list(p.isr_nodes) == [preferred])
        # The last ISR member stops before the other returns (a follower back while the
        # leader runs would catch up and rejoin the ISR).
        await stop(preferred)
        await start(second)
        offline = await partition_where(servers[second], lambda p: p.leader_id == -1)
        # The returned broker sees its own registration before it is asked to elect.
        await wait_for_metadata(
            servers[second], None, lambda r: second in {b.node_id for b in r.brokers}
        )
        assert list(offline.isr_nodes) == [preferred]
        assert (await elect(servers[second], 0))[0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert await elect(servers[second], 1) == (ErrorCode.NONE, None)
        elected = await partition_where(servers[second], lambda p: p.leader_id == second)
        assert list(elected.isr_nodes) == [second]
        for node_id in list(servers):
            await stop(node_id)
