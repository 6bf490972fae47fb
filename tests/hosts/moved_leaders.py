"""Leadership of one partition moved to a chosen host as an operator moves it: the same
replicas reordered so that the host is the preferred one (AlterPartitionReassignments),
then a preferred-leader election (ElectLeaders). The fault tests use it to put the
transaction coordinator (the leader of `__transaction_state`-0) on the host a fault hits.
"""

from __future__ import annotations

from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import AlterPartitionReassignmentsRequest, ElectLeadersRequest
from broker.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from broker.protocol.messages.elect_leaders_request import TopicPartitions
from tests.hosts.host_processes import (
    Host,
    Hosts,
    ask_host,
    host_metadata,
    host_partitions,
    wait_until,
)

TRANSACTION_STATE = "__transaction_state"
PREFERRED = 0
SETTLED = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)


def running(hosts: Hosts) -> list[Host]:
    return [h for h in hosts.hosts.values() if h.process is not None]


def leader_of(hosts: Hosts, topic: str, partition: int) -> int:
    return host_partitions(running(hosts)[0], topic)[partition].leader


def move_leader(hosts: Hosts, topic: str, partition: int, node_id: int) -> None:
    """Returns once every running host names `node_id` the partition's leader."""
    first = running(hosts)[0]
    view = host_partitions(first, topic)[partition]
    if view.leader == node_id:
        return
    controller = hosts.hosts[host_metadata(first, topic).controller_id]
    replicas = (node_id, *(r for r in view.replicas if r != node_id))
    reordered = ReassignableTopic(
        name=topic,
        partitions=(ReassignablePartition(partition_index=partition, replicas=replicas),),
    )
    answer = ask_host(controller, AlterPartitionReassignmentsRequest(topics=(reordered,)), 0)
    (result,) = answer.responses[0].partitions
    assert answer.error_code == result.error_code == ErrorCode.NONE, answer
    wait_until(
        f"{topic}-{partition} replicas {replicas}",
        lambda: all(
            host_partitions(h, topic)[partition].replicas == replicas for h in running(hosts)
        ),
    )
    election = ElectLeadersRequest(
        election_type=PREFERRED,
        topic_partitions=(TopicPartitions(topic=topic, partitions=(partition,)),),
        timeout_ms=10_000,
    )
    elected = ask_host(controller, election, 1)
    (outcome,) = elected.replica_election_results[0].partition_result
    assert elected.error_code == ErrorCode.NONE and outcome.error_code in SETTLED, elected
    wait_until(
        f"{topic}-{partition} led by {node_id} on every host",
        lambda: all(host_partitions(h, topic)[partition].leader == node_id for h in running(hosts)),
    )


def move_transaction_coordinator(hosts: Hosts, node_id: int) -> None:
    move_leader(hosts, TRANSACTION_STATE, 0, node_id)
