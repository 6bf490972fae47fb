"""CreateTopics, DeleteTopics, CreatePartitions, configs and DescribeCluster, end to end."""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from broker.protocol.messages.alter_configs_request import AlterableConfig, AlterConfigsResource
from broker.protocol.messages.create_partitions_request import CreatePartitionsTopic
from broker.protocol.messages.delete_topics_request import DeleteTopicState
from broker.protocol.messages.describe_configs_request import DescribeConfigsResource
from broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from broker.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from tests.integration.broker_harness import connect, running_broker
from tests.integration.data_helpers import batch, create_topic, fetch_all, produce

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2


async def describe(conn, resource_type: int, name: str, keys=None, version: int = 4):  # type: ignore[no-untyped-def]
    response = await conn.request(
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=keys
                ),
            ),
            include_synonyms=True,
            include_documentation=True,
        ),
        version,
    )
    return response.results[0]


async def incremental(conn, resource_type: int, name: str, *configs, validate_only=False):  # type: ignore[no-untyped-def]
    response = await conn.request(
        IncrementalAlterConfigsRequest(
            resources=(
                IncrementalResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configs=tuple(
                        IncrementalConfig(name=n, config_operation=op, value=v)
                        for n, op, v in configs
                    ),
                ),
            ),
            validate_only=validate_only,
        ),
        1,
    )
    return response.responses[0]


async def test_create_topic_reports_its_layout_configs_and_id(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        created = await create_topic(conn, "made", partitions=-1, configs={"retention.ms": "1000"})
        assert created.error_code == ErrorCode.NONE
        assert (created.num_partitions, created.replication_factor) == (1, 1)
        configs = {c.name: c for c in created.configs}
        assert configs["retention.ms"].value == "1000"
        assert configs["retention.ms"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
        assert configs["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
        assert created.topic_id != uuid.UUID(int=0)
        again = await create_topic(conn, "made")
        assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and again.error_message


async def test_create_topic_errors_carry_kafka_codes_and_messages(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        rf = await create_topic(conn, "rf3", replication_factor=3)
        assert rf.error_code == ErrorCode.INVALID_REPLICATION_FACTOR and "3" in rf.error_message
        bad_name = await create_topic(conn, "no/slash")
        assert bad_name.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        zero = await create_topic(conn, "zero", partitions=0)
        assert zero.error_code == ErrorCode.INVALID_PARTITIONS
        bad_config = await create_topic(conn, "cfg", configs={"no.such.config": "1"})
        assert bad_config.error_code == ErrorCode.INVALID_CONFIG
        dry = await create_topic(conn, "dry", validate_only=True)
        assert dry.error_code == ErrorCode.NONE
        listing = await conn.request(MetadataRequest(topics=None), 12)
        assert [t.name for t in listing.topics] == []


async def test_delete_topics_by_name_and_id(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        a = await create_topic(conn, "a")
        await create_topic(conn, "b")
        response = await conn.request(
            DeleteTopicsRequest(
                topics=(
                    DeleteTopicState(name=None, topic_id=a.topic_id),
                    DeleteTopicState(name="b"),
                    DeleteTopicState(name="c"),
                    DeleteTopicState(name=None, topic_id=uuid.uuid4()),
                ),
                timeout_ms=1000,
            ),
            6,
        )
        codes = [(r.name, r.error_code) for r in response.responses]
        assert codes[:3] == [
            ("a", ErrorCode.NONE),
            ("b", ErrorCode.NONE),
            ("c", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert codes[3][1] == ErrorCode.UNKNOWN_TOPIC_ID
        listing = await conn.request(MetadataRequest(topics=None), 12)
        assert listing.topics == ()


async def test_delete_topics_disabled(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path, {"delete.topic.enable": "false"}) as server,
        await connect(server) as conn,
    ):
        await create_topic(conn, "kept")
        response = await conn.request(
            DeleteTopicsRequest(topic_names=("kept",), timeout_ms=1000), 5
        )
        assert response.responses[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED


async def test_create_partitions_grows_and_refuses_shrinking(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        await create_topic(conn, "grow", partitions=2)

        async def grow(count: int, validate_only: bool = False) -> tuple[int, str | None]:
            response = await conn.request(
                CreatePartitionsRequest(
                    topics=(CreatePartitionsTopic(name="grow", count=count, assignments=None),),
                    timeout_ms=1000,
                    validate_only=validate_only,
                ),
                3,
            )
            result = response.results[0]
            return result.error_code, result.error_message

        assert (await grow(5, validate_only=True))[0] == ErrorCode.NONE
        assert (await grow(4))[0] == ErrorCode.NONE
        code, message = await grow(3)
        assert code == ErrorCode.INVALID_PARTITIONS and message
        assert (
            await produce(conn, "grow", batch([b"new"]), partition=3)
        ).error_code == ErrorCode.NONE
        assert (
            await produce(conn, "grow", batch([b"x"]), partition=4)
        ).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_topic_configs_describe_alter_and_incremental(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path, {"log.retention.hours": "24"}) as server,
        await connect(server) as conn,
    ):
        await create_topic(conn, "conf")
        result = await describe(conn, TOPIC, "conf")
        configs = {c.name: c for c in result.configs}
        assert configs["retention.ms"].value == str(24 * 3_600_000)
        assert configs["retention.ms"].config_source == 4  # STATIC_BROKER_CONFIG
        assert [s.name for s in configs["retention.ms"].synonyms][:1] == ["log.retention.hours"]
        assert configs["max.message.bytes"].documentation
        changed = await incremental(conn, TOPIC, "conf", ("retention.ms", SET, "5000"))
        assert changed.error_code == ErrorCode.NONE
        assert (await describe(conn, TOPIC, "conf", ["retention.ms"])).configs[0].value == "5000"
        not_list = await incremental(conn, TOPIC, "conf", ("retention.ms", APPEND, "1"))
        assert not_list.error_code == ErrorCode.INVALID_CONFIG
        bad = await incremental(conn, TOPIC, "conf", ("retention.ms", SET, "soon"))
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        dry = await incremental(
            conn, TOPIC, "conf", ("retention.ms", DELETE, None), validate_only=True
        )
        assert dry.error_code == ErrorCode.NONE
        assert (await describe(conn, TOPIC, "conf", ["retention.ms"])).configs[0].value == "5000"
        replaced = await conn.request(
            AlterConfigsRequest(
                resources=(
                    AlterConfigsResource(
                        resource_type=TOPIC,
                        resource_name="conf",
                        configs=(AlterableConfig(name="segment.ms", value="60000"),),
                    ),
                ),
                validate_only=False,
            ),
            2,
        )
        assert replaced.responses[0].error_code == ErrorCode.NONE
        after = {c.name: c for c in (await describe(conn, TOPIC, "conf")).configs}
        assert after["segment.ms"].value == "60000"
        assert after["retention.ms"].config_source == 4  # reverted: AlterConfigs replaces all
        missing = await describe(conn, TOPIC, "missing")
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_every_topic_key_a_topic_accepts_is_described_with_its_default(
    tmp_path: Path,
) -> None:
    from broker.config.topic_keys import TOPIC_CONFIGS

    async with (
        running_broker(tmp_path, {"log.index.size.max.bytes": "4096"}) as server,
        await connect(server) as conn,
    ):
        await create_topic(conn, "keys")
        configs = {c.name: c for c in (await describe(conn, TOPIC, "keys")).configs}
        assert set(configs) == set(TOPIC_CONFIGS)
        index = configs["segment.index.bytes"]
        assert (index.value, index.config_source) == ("4096", 4)  # STATIC_BROKER_CONFIG
        assert [s.name for s in index.synonyms] == [
            "log.index.size.max.bytes",
            "log.index.size.max.bytes",
        ]
        jitter = configs["segment.jitter.ms"]
        assert (jitter.value, jitter.config_source) == ("0", 5)  # DEFAULT_CONFIG
        set_unused = await incremental(conn, TOPIC, "keys", ("preallocate", SET, "true"))
        assert set_unused.error_code == ErrorCode.NONE
        bad_unused = await incremental(conn, TOPIC, "keys", ("preallocate", SET, "maybe"))
        assert bad_unused.error_code == ErrorCode.INVALID_CONFIG
        described = (await describe(conn, TOPIC, "keys", ["preallocate"])).configs[0]
        assert (described.value, described.config_source) == ("true", 1)  # DYNAMIC_TOPIC


async def test_broker_configs_describe_and_resize_threads(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        node = str(server.node_id)
        result = await describe(conn, BROKER, node)
        configs = {c.name: c for c in result.configs}
        assert configs["num.io.threads"].value == "2"
        assert configs["num.io.threads"].config_source == 4  # STATIC_BROKER_CONFIG
        assert configs["num.io.threads"].read_only is False
        assert configs["log.dirs"].read_only is True
        grown = await incremental(
            conn, BROKER, node, ("num.io.threads", SET, "4"), ("num.network.threads", SET, "3")
        )
        assert grown.error_code == ErrorCode.NONE, grown.error_message
        assert server.data_handlers.size == 4
        configs = {c.name: c for c in (await describe(conn, BROKER, node)).configs}
        assert configs["num.io.threads"].value == "4"
        assert configs["num.io.threads"].config_source == 2  # DYNAMIC_BROKER_CONFIG
        too_far = await incremental(conn, BROKER, node, ("num.io.threads", SET, "20"))
        assert too_far.error_code == ErrorCode.INVALID_REQUEST and "double" in too_far.error_message
        read_only = await incremental(conn, BROKER, node, ("log.dirs", SET, "/tmp"))
        assert read_only.error_code == ErrorCode.INVALID_REQUEST
        assert "cannot be updated dynamically" in read_only.error_message
        other = await incremental(conn, BROKER, "99", ("num.io.threads", SET, "3"))
        assert other.error_code == ErrorCode.INVALID_REQUEST
        reverted = await incremental(conn, BROKER, node, ("num.io.threads", DELETE, None))
        assert reverted.error_code == ErrorCode.NONE and server.data_handlers.size == 2
        # the broker still serves after resizing
        await create_topic(conn, "after-resize")
        await produce(conn, "after-resize", batch([b"ok"]))
        assert [v for _, v in await fetch_all(conn, "after-resize")] == [b"ok"]


async def test_describe_cluster_advertises_this_broker(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        response = await conn.request(DescribeClusterRequest(endpoint_type=1), 1)
        assert response.error_code == ErrorCode.NONE
        assert response.cluster_id == server.cluster_id
        assert [(b.broker_id, b.port) for b in response.brokers] == [
            (server.node_id, server.bound_port())
        ]
        controllers = await conn.request(DescribeClusterRequest(endpoint_type=2), 1)
        assert controllers.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


async def test_metadata_lists_topics_with_ids_from_v10(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as server, await connect(server) as conn:
        created = await create_topic(conn, "listed", partitions=2)
        response = await conn.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name="listed"),),
                include_topic_authorized_operations=True,
            ),
            10,
        )
        topic = response.topics[0]
        assert topic.topic_id == created.topic_id
        assert [(p.partition_index, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
            (0, (server.node_id,), (server.node_id,)),
            (1, (server.node_id,), (server.node_id,)),
        ]
        assert topic.topic_authorized_operations > 0
        old = await conn.request(MetadataRequest(topics=(MetadataRequestTopic(name="listed"),)), 1)
        assert len(old.topics[0].partitions) == 2
