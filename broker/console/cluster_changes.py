"""The console's changes to the cluster, each one Kafka admin request with the
logged-in principal (the broker's ACLs allow or refuse it; a refusal is a message)."""

from __future__ import annotations

from broker.client.fetcher import EARLIEST, LATEST, list_offsets
from broker.client.group_offsets import fetch_committed
from broker.client.session import ClientError, check_error
from broker.console.cluster_reads import TOPIC_RESOURCE
from broker.console.console_session import ConsoleSession
from broker.protocol.api import ApiKey
from broker.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    OffsetCommitRequest,
)
from broker.protocol.messages.create_partitions_request import CreatePartitionsTopic
from broker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from broker.protocol.messages.delete_topics_request import DeleteTopicState
from broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

_TIMEOUT_MS = 30_000
SET, DELETE = 0, 1


async def create_topic(
    session: ConsoleSession,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str],
) -> None:
    body = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
            ),
        ),
        timeout_ms=_TIMEOUT_MS,
    )
    response = await session.call(body)
    for result in response.topics:
        check_error(result.error_code, f"create topic {name!r}", result.error_message)


async def add_partitions(session: ConsoleSession, name: str, total: int) -> None:
    body = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=name, count=total, assignments=None),),
        timeout_ms=_TIMEOUT_MS,
    )
    response = await session.call(body)
    for result in response.results:
        check_error(result.error_code, f"add partitions to {name!r}", result.error_message)


async def alter_configs(
    session: ConsoleSession, name: str, set_: dict[str, str], delete: list[str]
) -> None:
    configs = [AlterableConfig(name=k, config_operation=SET, value=v) for k, v in set_.items()]
    configs += [AlterableConfig(name=k, config_operation=DELETE, value=None) for k in delete]
    body = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configs=tuple(configs)
            ),
        )
    )
    response = await session.call(body)
    for result in response.responses:
        check_error(result.error_code, f"alter configs of {name!r}", result.error_message)


async def delete_topic(session: ConsoleSession, name: str) -> None:
    version = session.version_for(ApiKey.DELETE_TOPICS)
    if version >= 6:
        body = DeleteTopicsRequest(topics=(DeleteTopicState(name=name),), timeout_ms=_TIMEOUT_MS)
    else:
        body = DeleteTopicsRequest(topic_names=(name,), timeout_ms=_TIMEOUT_MS)
    response = await session.request(body, version)
    for result in response.responses:
        check_error(result.error_code, f"delete topic {name!r}", result.error_message)


async def delete_group(session: ConsoleSession, group_id: str) -> None:
    response = await session.call_coordinator(
        group_id, DeleteGroupsRequest(groups_names=(group_id,))
    )
    for result in response.results:
        check_error(result.error_code, f"delete group {group_id!r}")


async def reset_offsets(
    session: ConsoleSession, group_id: str, topic: str, to: str, offset: int | None
) -> dict[int, int]:
    """Commit new offsets for the group's partitions of `topic` (to earliest, latest or
    an offset), as kafka-consumer-groups --reset-offsets does: only while the group has
    no members (the coordinator refuses a commit from outside an active generation)."""
    committed = await fetch_committed(session, group_id)
    partitions = sorted(p for (t, p) in committed if t == topic)
    if not partitions:
        raise ClientError(f"group {group_id!r} has no committed offsets on {topic!r}")
    if to == "earliest":
        targets = await list_offsets(session, topic, partitions, EARLIEST)
    elif to == "latest":
        targets = await list_offsets(session, topic, partitions, LATEST)
    elif to == "offset" and offset is not None and offset >= 0:
        targets = dict.fromkeys(partitions, offset)
    else:
        raise ClientError("reset to earliest, latest, or a given offset of 0 or more")
    body = OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=(
            OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                    for p, o in sorted(targets.items())
                ),
            ),
        ),
    )
    response = await session.call(body, maximum=8)
    for t in response.topics:
        for p in t.partitions:
            check_error(
                p.error_code, f"reset offsets of {group_id!r} on {t.name}-{p.partition_index}"
            )
    return targets
