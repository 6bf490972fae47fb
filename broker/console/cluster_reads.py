"""What the console's pages show of the cluster, read with the logged-in principal.

Everything here is a Kafka request through our client, so the broker's ACLs decide
what a principal sees: Metadata leaves out topics it may not DESCRIBE, and their
names never reach the page. Results are plain JSON-ready dicts.
"""

from __future__ import annotations

from typing import Any

from broker.client.fetcher import EARLIEST, LATEST, list_offsets
from broker.client.group_description import describe_partitions
from broker.client.group_member import decode_versioned
from broker.client.session import ClientError, check_error
from broker.console.console_session import ConsoleSession
from broker.protocol.api import ApiKey
from broker.protocol.messages import (
    ConsumerProtocolAssignment,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    MetadataRequest,
    MetadataResponse,
)
from broker.protocol.messages.describe_configs_request import DescribeConfigsResource
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.security.acl import AclOperation

TOPIC_RESOURCE = 2
# Metadata v8-v10 carry the cluster's authorized operations (v11 dropped them).
_METADATA_WITH_CLUSTER_OPERATIONS = 10
SHOWN_CONFIGS = ("retention.ms", "retention.bytes", "cleanup.policy")


def allowed(operations: int, operation: AclOperation) -> bool:
    """Kafka's authorized-operations bit set (ALL implies each; unknown: not allowed)."""
    if operations < 0:
        return False
    return bool(operations & (1 << operation) or operations & (1 << AclOperation.ALL))


async def metadata(session: ConsoleSession, topics: list[str] | None) -> MetadataResponse:
    version = session.version_for(
        ApiKey.METADATA, minimum=8, maximum=_METADATA_WITH_CLUSTER_OPERATIONS
    )
    body = MetadataRequest(
        topics=None if topics is None else tuple(MetadataRequestTopic(name=t) for t in topics),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    response: MetadataResponse = await session.request(body, version)
    return response


def brokers(response: MetadataResponse) -> list[dict[str, Any]]:
    leaders: dict[int, int] = {}
    for topic in response.topics:
        for p in topic.partitions:
            leaders[p.leader_id] = leaders.get(p.leader_id, 0) + 1
    return [
        {
            "node_id": b.node_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "leaders": leaders.get(b.node_id, 0),
            "controller": b.node_id == response.controller_id,
        }
        for b in sorted(response.brokers, key=lambda b: b.node_id)
    ]


def partition_health(response: MetadataResponse) -> dict[str, int]:
    """Partitions in all, those whose ISR lacks a replica, and those without a leader."""
    partitions = [p for t in response.topics for p in t.partitions]
    return {
        "total": len(partitions),
        "under_replicated": sum(len(p.isr_nodes) < len(p.replica_nodes) for p in partitions),
        "offline": sum(p.leader_id < 0 for p in partitions),
    }


def cluster_permissions(response: MetadataResponse) -> dict[str, bool]:
    ops = response.cluster_authorized_operations
    return {
        "create_topics": allowed(ops, AclOperation.CREATE),
        "alter_cluster": allowed(ops, AclOperation.ALTER),
        "describe_cluster": allowed(ops, AclOperation.DESCRIBE),
        "alter_cluster_configs": allowed(ops, AclOperation.ALTER_CONFIGS),
    }


def topic_permissions(operations: int) -> dict[str, bool]:
    return {
        "alter": allowed(operations, AclOperation.ALTER),
        "alter_configs": allowed(operations, AclOperation.ALTER_CONFIGS),
        "delete": allowed(operations, AclOperation.DELETE),
        "read": allowed(operations, AclOperation.READ),
        "write": allowed(operations, AclOperation.WRITE),
    }


async def topic_configs(
    session: ConsoleSession, names: list[str], keys: tuple[str, ...] | None
) -> dict[str, dict[str, str | None]]:
    """Configs per topic (only `keys` unless None); a topic refused is left out."""
    if not names:
        return {}
    body = DescribeConfigsRequest(
        resources=tuple(
            DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=keys
            )
            for n in names
        )
    )
    response = await session.call(body)
    return {
        r.resource_name: {c.name: c.value for c in r.configs}
        for r in response.results
        if r.error_code == 0
    }


async def list_topics(session: ConsoleSession) -> dict[str, Any]:
    response = await metadata(session, None)
    topics = sorted((t for t in response.topics if not t.error_code), key=lambda t: t.name or "")
    names = [t.name or "" for t in topics]
    configs = await topic_configs(session, names, SHOWN_CONFIGS)
    return {
        "permissions": cluster_permissions(response),
        "topics": [
            {
                "name": t.name,
                "partitions": len(t.partitions),
                "internal": t.is_internal,
                "configs": configs.get(t.name or "", {}),
            }
            for t in topics
        ],
    }


async def describe_topic(session: ConsoleSession, name: str) -> dict[str, Any]:
    response = await metadata(session, [name])
    topic = next((t for t in response.topics if t.name == name), None)
    if topic is None:
        raise ClientError(f"topic {name!r}: UNKNOWN_TOPIC_OR_PARTITION")
    check_error(topic.error_code, f"topic {name!r}")
    indexes = sorted(p.partition_index for p in topic.partitions)
    permissions = topic_permissions(topic.topic_authorized_operations)
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    if indexes:
        starts = await list_offsets(session, name, indexes, EARLIEST)
        ends = await list_offsets(session, name, indexes, LATEST)
    configs = await topic_configs(session, [name], None)
    return {
        "name": name,
        "topic_id": str(topic.topic_id),
        "internal": topic.is_internal,
        "permissions": permissions,
        "partitions": [
            {
                "partition": p.partition_index,
                "leader": p.leader_id,
                "replicas": list(p.replica_nodes),
                "isr": list(p.isr_nodes),
                "start_offset": starts.get(p.partition_index),
                "end_offset": ends.get(p.partition_index),
            }
            for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        ],
        "configs": configs.get(name, {}),
    }


async def list_groups(session: ConsoleSession) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for broker in await session.every_broker():
        response = await broker.call(ListGroupsRequest())
        check_error(response.error_code, "ListGroups failed")
        for g in response.groups:
            groups[g.group_id] = {
                "group_id": g.group_id,
                "state": g.group_state or None,
                "protocol_type": g.protocol_type or None,
            }
    return [groups[k] for k in sorted(groups)]


def _assignment(data: bytes) -> list[dict[str, Any]]:
    try:
        decoded = decode_versioned(ConsumerProtocolAssignment, data)
    except Exception:  # another protocol's bytes: shown as nothing rather than a failure
        return []
    if decoded is None:
        return []
    return [
        {"topic": t.topic, "partitions": sorted(t.partitions)}
        for t in getattr(decoded, "assigned_partitions", ())
    ]


async def describe_group(session: ConsoleSession, group_id: str) -> dict[str, Any]:
    body = DescribeGroupsRequest(groups=(group_id,), include_authorized_operations=True)
    response = await session.call_coordinator(group_id, body)
    (group,) = response.groups
    check_error(group.error_code, f"group {group_id!r}")
    if group.group_state == "Dead":
        raise ClientError(f"group {group_id!r} does not exist")
    lag = [r for r in await describe_partitions(session, group) if r.committed is not None]
    return {
        "group_id": group_id,
        "state": group.group_state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_data,
        "permissions": {
            # Resetting offsets is an OffsetCommit (READ on the group), deleting DELETE.
            "reset": allowed(group.authorized_operations, AclOperation.READ),
            "delete": allowed(group.authorized_operations, AclOperation.DELETE),
        },
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": _assignment(m.member_assignment),
            }
            for m in group.members
        ],
        "offsets": [
            {
                "topic": row.topic,
                "partition": row.partition,
                "committed": row.committed,
                "log_end": row.log_end,
                "lag": row.lag,
            }
            for row in lag
        ],
        "total_lag": sum(row.lag or 0 for row in lag),
    }
