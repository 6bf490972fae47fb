"""Each data and admin API asks the authorizer what Kafka's KafkaApis asks, and answers
a refusal with Kafka's error code, per item where the response has items.

Handlers are called directly with requests from chosen principals (alice is granted
what a test needs, bob nothing), against an in-memory log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.errors import KafkaError
from broker.handlers.alter_configs import ConfigAlterer, IncrementalAlterConfigsHandler
from broker.handlers.auth_helper import check_cluster
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.common import AUTHORIZED_OPERATIONS_OMITTED
from broker.handlers.create_acls import CreateAclsHandler
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_acls import DeleteAclsHandler
from broker.handlers.delete_records import DeleteRecordsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_acls import DescribeAclsHandler
from broker.handlers.describe_cluster import DescribeClusterHandler
from broker.handlers.describe_configs import DescribeConfigsHandler
from broker.handlers.fetch import FetchHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.log_topics import LogTopicSource
from broker.handlers.metadata import MetadataHandler
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.produce import ProduceHandler
from broker.handlers.replica_tracking import NoReplication
from broker.protocol import records as rec
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    FetchRequest,
    FetchResponse,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    ProduceResponse,
)
from broker.protocol.messages.create_acls_request import AclCreation
from broker.protocol.messages.create_partitions_request import CreatePartitionsTopic
from broker.protocol.messages.create_topics_request import CreatableTopic
from broker.protocol.messages.delete_acls_request import DeleteAclsFilter
from broker.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from broker.protocol.messages.describe_configs_request import DescribeConfigsResource
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    operations_bit_field,
)
from broker.security.acl_store import AclStore
from broker.security.authorizer import ALLOW_ALL, Authorizer, StandardAuthorizer
from broker.topology import SingleProcessTopology
from tests.handlers.fake_log import FakeLog, FakeTopic
from tests.handlers.request_factory import ALICE, BOB, make_request
from tests.security.acl_strategies import acl

Op = AclOperation
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
CLUSTER = ResourceType.CLUSTER


def cluster_acl(operation: AclOperation, principal: str = ALICE) -> AclBinding:
    return acl("kafka-cluster", operation, principal=principal, resource_type=CLUSTER)


def one_batch() -> bytes:
    return rec.encode_batch([rec.Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v")])


def produce_body(*topics: str, transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        transactional_id=transactional_id,
        topic_data=tuple(
            TopicProduceData(
                name=t, partition_data=(PartitionProduceData(index=0, records=one_batch()),)
            )
            for t in topics
        ),
    )


async def test_produce_needs_write_on_each_topic_and_appends_only_where_allowed() -> None:
    log = FakeLog(FakeTopic("mine", 1), FakeTopic("theirs", 1))
    authorizer = StandardAuthorizer([acl("mine", Op.WRITE)])
    handler = ProduceHandler(log, authorizer=authorizer)
    response = await handler.handle(make_request(produce_body("mine", "theirs"), 0, 9))
    assert isinstance(response, ProduceResponse)
    codes = {t.name: t.partition_responses[0].error_code for t in response.responses}
    assert codes == {"mine": ErrorCode.NONE, "theirs": TAF}
    assert len(log.partition("mine", 0).batches) == 1  # type: ignore[union-attr]
    assert log.partition("theirs", 0).batches == []  # type: ignore[union-attr]
    # Unknown topics are not revealed to a principal without WRITE on them.
    unknown = await handler.handle(make_request(produce_body("missing"), 0, 9))
    assert isinstance(unknown, ProduceResponse)
    assert unknown.responses[0].partition_responses[0].error_code == TAF


def transactional_body(topic: str, transactional_id: str | None) -> ProduceRequest:
    batch = rec.encode_batch(
        [rec.Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v")],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    return ProduceRequest(
        acks=-1,
        transactional_id=transactional_id,
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )


@pytest.mark.parametrize(
    ("authorizer", "transactional_id"),
    [
        (StandardAuthorizer([acl("t", Op.WRITE)]), "tx"),  # no WRITE on "tx"
        # Kafka refuses them whatever the authorizer: a producer id is no transaction.
        (ALLOW_ALL, None),
    ],
    ids=["without-write-on-the-id", "without-an-id"],
)
async def test_transactional_records_need_write_on_a_transactional_id(
    authorizer: Authorizer, transactional_id: str | None
) -> None:
    log = FakeLog(FakeTopic("t", 1))
    handler = ProduceHandler(log, authorizer=authorizer)
    body = transactional_body("t", transactional_id)
    response = await handler.handle(make_request(body, 0, 9))
    assert isinstance(response, ProduceResponse)
    code = response.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert log.partition("t", 0).batches == []  # type: ignore[union-attr]


async def test_plain_records_are_not_checked_against_a_transactional_id() -> None:
    # As Kafka: only transactional records ask for WRITE on the transactional id.
    log = FakeLog(FakeTopic("t", 1))
    handler = ProduceHandler(log, authorizer=StandardAuthorizer([acl("t", Op.WRITE)]))
    response = await handler.handle(make_request(produce_body("t", transactional_id="tx"), 0, 9))
    assert isinstance(response, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert len(log.partition("t", 0).batches) == 1  # type: ignore[union-attr]


def fetch_body(*topics: str) -> FetchRequest:
    return FetchRequest(
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=tuple(
            FetchTopic(
                topic=t,
                partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1000),),
            )
            for t in topics
        ),
    )


async def test_a_consumer_without_read_gets_topic_authorization_failed_and_no_records() -> None:
    log = FakeLog(FakeTopic("open", 1), FakeTopic("secret", 1))
    for name in ("open", "secret"):
        await log.partition(name, 0).append(one_batch(), rec.read_batch_header(one_batch()))  # type: ignore[union-attr]
    authorizer = StandardAuthorizer([acl("open", Op.READ), acl("secret", Op.DESCRIBE)])
    handler = FetchHandler(log, authorizer=authorizer)
    response = await handler.handle(make_request(fetch_body("open", "secret"), 1, 12))
    assert isinstance(response, FetchResponse)
    by_topic = {t.topic: t.partitions[0] for t in response.responses}
    opened = by_topic["open"].records
    assert by_topic["open"].error_code == ErrorCode.NONE and opened is not None and len(opened) > 0
    assert by_topic["secret"].error_code == TAF
    assert not by_topic["secret"].records
    assert log.partition("secret", 0).reads == []  # type: ignore[union-attr]


class FollowerFetches(NoReplication):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def on_follower_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int
    ) -> ErrorCode:
        self.seen.append((topic, replica_id))
        return ErrorCode.NONE


async def test_a_replica_fetch_needs_cluster_action_even_with_read_on_the_topic() -> None:
    log = FakeLog(FakeTopic("t", 1))
    await log.partition("t", 0).append(one_batch(), rec.read_batch_header(one_batch()))  # type: ignore[union-attr]
    authorizer = StandardAuthorizer(
        [acl("t", Op.READ), acl("t", Op.READ, principal=BOB), cluster_acl(Op.CLUSTER_ACTION)]
    )
    followers = FollowerFetches()
    handler = FetchHandler(log, authorizer=authorizer, replication=followers)
    body = fetch_body("t")._replace(replica_id=2)
    for principal in (BOB, "User:ANONYMOUS"):
        refused = await handler.handle(make_request(body, 1, 12, principal=principal))
        assert isinstance(refused, FetchResponse)
        assert refused.responses[0].partitions[0].error_code == TAF
        assert not refused.responses[0].partitions[0].records
    assert followers.seen == []  # nothing moved the high watermark or the ISR
    allowed = await handler.handle(make_request(body, 1, 12))
    assert isinstance(allowed, FetchResponse)
    assert allowed.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert followers.seen == [("t", 2)]
    consumer = await handler.handle(make_request(fetch_body("t"), 1, 12, principal=BOB))
    assert isinstance(consumer, FetchResponse)
    assert consumer.responses[0].partitions[0].error_code == ErrorCode.NONE


async def test_list_offsets_and_offset_for_leader_epoch_need_describe() -> None:
    log = FakeLog(FakeTopic("t", 1))
    authorizer = StandardAuthorizer([acl("t", Op.READ)])  # READ implies DESCRIBE
    list_offsets = ListOffsetsHandler(log, authorizer=authorizer)
    body = ListOffsetsRequest(
        topics=(ListOffsetsTopic(name="t", partitions=(ListOffsetsPartition(timestamp=-1),)),)
    )
    allowed = await list_offsets.handle(make_request(body, 2, 7))
    refused = await list_offsets.handle(make_request(body, 2, 7, principal=BOB))
    assert allowed.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert refused.topics[0].partitions[0].error_code == TAF
    epochs = OffsetForLeaderEpochHandler(log, authorizer=authorizer)
    body2 = OffsetForLeaderEpochRequest(
        topics=(
            OffsetForLeaderTopic(topic="t", partitions=(OffsetForLeaderPartition(partition=0),)),
        )
    )
    assert (await epochs.handle(make_request(body2, 23, 4))).topics[0].partitions[
        0
    ].error_code == ErrorCode.NONE
    assert (await epochs.handle(make_request(body2, 23, 4, principal=BOB))).topics[0].partitions[
        0
    ].error_code == TAF
    # A follower's question: CLUSTER_ACTION answers it without DESCRIBE on the topic.
    follower = OffsetForLeaderEpochHandler(
        log, authorizer=StandardAuthorizer([cluster_acl(Op.CLUSTER_ACTION, principal=BOB)])
    )
    assert (await follower.handle(make_request(body2, 23, 4, principal=BOB))).topics[0].partitions[
        0
    ].error_code == ErrorCode.NONE


def metadata_handler(log: FakeLog, authorizer: StandardAuthorizer) -> MetadataHandler:
    return MetadataHandler(
        1,
        "cluster",
        lambda _listener: ("localhost", 9092),
        LogTopicSource(log, SingleProcessTopology(1, lambda _listener: ("localhost", 9092))),
        authorizer=authorizer,
    )


def metadata_body(*names: str, all_topics: bool = False, **kwargs: bool) -> MetadataRequest:
    topics = None if all_topics else tuple(MetadataRequestTopic(name=n) for n in names)
    return MetadataRequest(topics=topics, **kwargs)


async def test_metadata_hides_undescribable_topics_when_listing_all() -> None:
    log = FakeLog(FakeTopic("pub-a", 1), FakeTopic("pub-b", 1), FakeTopic("private", 1))
    authorizer = StandardAuthorizer([acl("pub-", Op.DESCRIBE, pattern_type=PatternType.PREFIXED)])
    handler = metadata_handler(log, authorizer)
    response = await handler.handle(make_request(metadata_body(all_topics=True), 3, 12))
    assert sorted(t.name or "" for t in response.topics) == ["pub-a", "pub-b"]
    assert all(t.error_code == ErrorCode.NONE for t in response.topics)


async def test_metadata_refuses_named_topics_it_may_not_describe_whether_or_not_they_exist() -> (
    None
):
    log = FakeLog(FakeTopic("visible", 1), FakeTopic("private", 1))
    authorizer = StandardAuthorizer([acl("visible", Op.DESCRIBE)])
    handler = metadata_handler(log, authorizer)
    body = metadata_body("visible", "private", "nowhere", allow_auto_topic_creation=False)
    response = await handler.handle(make_request(body, 3, 12))
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {"visible": ErrorCode.NONE, "private": TAF, "nowhere": TAF}
    assert all(not t.partitions for t in response.topics if t.error_code == TAF)


async def test_metadata_auto_creates_only_with_create_on_the_cluster_or_the_topic() -> None:
    log = FakeLog()
    authorizer = StandardAuthorizer([acl("*", Op.DESCRIBE), acl("made", Op.CREATE)])
    handler = metadata_handler(log, authorizer)
    body = metadata_body("made", "refused", allow_auto_topic_creation=True)
    response = await handler.handle(make_request(body, 3, 12))
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {"made": ErrorCode.NONE, "refused": TAF}
    assert set(log.topics()) == {"made"}
    authorizer.add_acls([cluster_acl(Op.CREATE)])
    again = await handler.handle(make_request(metadata_body("refused"), 3, 12))
    assert again.topics[0].error_code == ErrorCode.NONE
    assert set(log.topics()) == {"made", "refused"}


async def test_metadata_fills_authorized_operations_for_the_principal() -> None:
    log = FakeLog(FakeTopic("t", 1))
    authorizer = StandardAuthorizer([acl("t", Op.READ), cluster_acl(Op.DESCRIBE)])
    handler = metadata_handler(log, authorizer)
    body = metadata_body(
        "t", include_topic_authorized_operations=True, include_cluster_authorized_operations=True
    )
    response = await handler.handle(make_request(body, 3, 10))
    assert response.topics[0].topic_authorized_operations == operations_bit_field(
        [Op.READ, Op.DESCRIBE]
    )
    assert response.cluster_authorized_operations == operations_bit_field([Op.DESCRIBE])
    plain = await handler.handle(make_request(metadata_body("t"), 3, 10))
    assert plain.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert plain.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    bob = await handler.handle(make_request(body, 3, 10, principal=BOB))
    assert bob.cluster_authorized_operations == 0  # without DESCRIBE on the cluster


async def test_create_topics_needs_create_on_the_cluster_or_the_topic() -> None:
    log = FakeLog()
    authorizer = StandardAuthorizer([acl("ok-", Op.CREATE, pattern_type=PatternType.PREFIXED)])
    handler = CreateTopicsHandler(log, BrokerConfig({}), authorizer=authorizer)
    body = CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in ("ok-1", "nope")
        )
    )
    response = await handler.handle(make_request(body, 19, 7))
    results = {t.name: t for t in response.topics}
    assert results["ok-1"].error_code == ErrorCode.NONE
    assert results["nope"].error_code == TAF
    # Created, but its configs are hidden without DESCRIBE_CONFIGS.
    assert results["ok-1"].topic_config_error_code == TAF and results["ok-1"].configs == ()
    assert set(log.topics()) == {"ok-1"}


async def test_delete_topics_and_delete_records_need_delete_and_create_partitions_alter() -> None:
    log = FakeLog(FakeTopic("t", 1), FakeTopic("u", 1))
    authorizer = StandardAuthorizer([acl("u", Op.DELETE), acl("t", Op.DESCRIBE)])
    records = DeleteRecordsHandler(log, authorizer=authorizer)
    body = DeleteRecordsRequest(
        topics=(
            DeleteRecordsTopic(
                name="t", partitions=(DeleteRecordsPartition(partition_index=0, offset=-1),)
            ),
        )
    )
    assert (await records.handle(make_request(body, 21, 2))).topics[0].partitions[
        0
    ].error_code == TAF
    partitions = CreatePartitionsHandler(log, 1, authorizer=authorizer)
    grow = CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="t", count=3),))
    assert (await partitions.handle(make_request(grow, 37, 3))).results[0].error_code == TAF
    deleter = DeleteTopicsHandler(log, True, authorizer=authorizer)
    response = await deleter.handle(
        make_request(DeleteTopicsRequest(topic_names=("t", "u", "missing")), 20, 5)
    )
    codes = {r.name: r.error_code for r in response.responses}
    assert codes == {"t": TAF, "u": ErrorCode.NONE, "missing": TAF}
    assert set(log.topics()) == {"t"}


async def test_configs_need_describe_or_alter_configs_on_the_topic_or_the_cluster() -> None:
    log = FakeLog(FakeTopic("t", 1))
    config = BrokerConfig({})
    authorizer = StandardAuthorizer([acl("t", Op.DESCRIBE_CONFIGS)])
    brokers = BrokerConfigs.__new__(BrokerConfigs)  # never reached: authorization refuses first
    describe = DescribeConfigsHandler(log, config, brokers, authorizer=authorizer)
    body = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=2, resource_name="t", configuration_keys=("retention.ms",)
            ),
            DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None),
        )
    )
    results = (await describe.handle(make_request(body, 32, 4))).results
    assert [r.error_code for r in results] == [ErrorCode.NONE, CAF]
    alter = IncrementalAlterConfigsHandler(ConfigAlterer(log, brokers), authorizer=authorizer)
    change = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=2,
                resource_name="t",
                configs=(AlterableConfig(name="retention.ms", config_operation=0, value="1"),),
            ),
        )
    )
    assert (await alter.handle(make_request(change, 44, 1))).responses[0].error_code == TAF


async def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic() -> None:
    log = FakeLog()
    body = InitProducerIdRequest(transactional_id=None, producer_id=-1, producer_epoch=-1)
    for acls, expected in (
        ([], CAF),
        ([cluster_acl(Op.IDEMPOTENT_WRITE)], ErrorCode.NONE),
        ([acl("t", Op.WRITE)], ErrorCode.NONE),
        ([acl("t", Op.WRITE), acl("t", Op.WRITE, AclPermissionType.DENY)], CAF),
    ):
        handler = InitProducerIdHandler(log, authorizer=StandardAuthorizer(acls))
        assert (await handler.handle(make_request(body, 22, 4))).error_code == expected, acls
    transactional = InitProducerIdRequest(transactional_id="tx", producer_id=-1, producer_epoch=-1)
    handler = InitProducerIdHandler(log, authorizer=StandardAuthorizer([]))
    response = await handler.handle(make_request(transactional, 22, 4))
    assert response.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_describe_cluster_fills_authorized_operations_only_for_describe() -> None:
    authorizer = StandardAuthorizer([cluster_acl(Op.ALTER)])
    handler = DescribeClusterHandler(1, "c", lambda _: ("h", 1), authorizer=authorizer)
    body = DescribeClusterRequest(include_cluster_authorized_operations=True)
    alice = await handler.handle(make_request(body, 60, 0))
    assert alice.cluster_authorized_operations == operations_bit_field([Op.ALTER, Op.DESCRIBE])
    bob = await handler.handle(make_request(body, 60, 0, principal=BOB))
    assert bob.error_code == ErrorCode.NONE and bob.cluster_authorized_operations == 0


def creation(name: str, principal: str = BOB, **kwargs: int) -> AclCreation:
    fields = {
        "resource_type": ResourceType.TOPIC,
        "resource_name": name,
        "resource_pattern_type": PatternType.LITERAL,
        "principal": principal,
        "host": "*",
        "operation": Op.READ,
        "permission_type": AclPermissionType.ALLOW,
    }
    fields.update(kwargs)
    return AclCreation(**fields)  # type: ignore[arg-type]


async def test_acls_are_managed_with_alter_and_describe_on_the_cluster_and_persisted(
    tmp_path: Path,
) -> None:
    authorizer = StandardAuthorizer([cluster_acl(Op.ALTER)])
    store = AclStore(tmp_path)
    create = CreateAclsHandler(authorizer, store)
    describe = DescribeAclsHandler(authorizer)
    delete = DeleteAclsHandler(authorizer, store)
    body = CreateAclsRequest(
        creations=(creation("t"), creation("t", operation=Op.ANY), creation("", principal=BOB))
    )
    refused = await create.handle(make_request(body, 30, 3, principal=BOB))
    assert [r.error_code for r in refused.results] == [CAF] * 3
    created = await create.handle(make_request(body, 30, 3))
    assert [r.error_code for r in created.results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert authorizer.authorize(BOB, "h", Op.READ, ResourceType.TOPIC, "t")
    assert set(store.load()) == set(authorizer.bindings())

    everything = DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY,
        resource_name_filter=None,
        pattern_type_filter=PatternType.ANY,
        principal_filter=None,
        host_filter=None,
        operation=Op.ANY,
        permission_type=AclPermissionType.ANY,
    )
    assert (await describe.handle(make_request(everything, 29, 3, principal=BOB))).error_code == CAF
    authorizer.add_acls([cluster_acl(Op.DESCRIBE, principal=BOB)])
    described = await describe.handle(make_request(everything, 29, 3, principal=BOB))
    assert described.error_code == ErrorCode.NONE
    names = {(r.resource_type, r.resource_name) for r in described.resources}
    assert names == {(ResourceType.TOPIC, "t"), (ResourceType.CLUSTER, "kafka-cluster")}

    bobs = DeleteAclsFilter(
        resource_type_filter=ResourceType.TOPIC,
        resource_name_filter=None,
        pattern_type_filter=PatternType.ANY,
        principal_filter=BOB,
        host_filter=None,
        operation=Op.ANY,
        permission_type=AclPermissionType.ANY,
    )
    deleted = await delete.handle(make_request(DeleteAclsRequest(filters=(bobs,)), 31, 3))
    matched = deleted.filter_results[0].matching_acls
    assert [(m.resource_name, m.principal) for m in matched] == [("t", BOB)]
    assert not authorizer.authorize(BOB, "h", Op.READ, ResourceType.TOPIC, "t")
    assert set(store.load()) == set(authorizer.bindings())


async def test_acl_apis_answer_security_disabled_without_an_authorizer(tmp_path: Path) -> None:
    create = CreateAclsHandler(ALLOW_ALL, AclStore(tmp_path))
    response = await create.handle(
        make_request(CreateAclsRequest(creations=(creation("t"),)), 30, 3)
    )
    assert response.results[0].error_code == ErrorCode.SECURITY_DISABLED
    describe = await DescribeAclsHandler(ALLOW_ALL).handle(
        make_request(DescribeAclsRequest(), 29, 3)
    )
    assert describe.error_code == ErrorCode.SECURITY_DISABLED
    assert not (tmp_path / "__acls.json").exists()


@pytest.mark.parametrize("operation", [Op.READ, Op.ALL])
async def test_deny_beats_allow_in_a_handler(operation: AclOperation) -> None:
    log = FakeLog(FakeTopic("t", 1))
    authorizer = StandardAuthorizer(
        [acl("*", Op.ALL, principal="User:*"), acl("t", operation, AclPermissionType.DENY)]
    )
    handler = FetchHandler(log, authorizer=authorizer)
    response = await handler.handle(make_request(fetch_body("t"), 1, 12))
    assert isinstance(response, FetchResponse)
    assert response.responses[0].partitions[0].error_code == TAF
    other = await handler.handle(make_request(fetch_body("t"), 1, 12, principal=BOB))
    assert isinstance(other, FetchResponse)
    assert other.responses[0].partitions[0].error_code == ErrorCode.NONE


def test_cluster_wide_apis_raise_cluster_authorization_failed_without_the_operation() -> None:
    authorizer = StandardAuthorizer([cluster_acl(Op.DESCRIBE)])
    check_cluster(authorizer, make_request(None, 50, 0), Op.DESCRIBE)
    with pytest.raises(KafkaError) as refused:
        check_cluster(authorizer, make_request(None, 51, 0), Op.ALTER)
    assert refused.value.error_code == CAF
    check_cluster(ALLOW_ALL, make_request(None, 51, 0, principal=BOB), Op.ALTER)


async def test_scram_credentials_need_describe_or_alter_on_the_cluster(tmp_path: Path) -> None:
    import hashlib

    from broker.handlers.scram_credentials_apis import (
        AlterUserScramCredentialsHandler,
        DescribeUserScramCredentialsHandler,
    )
    from broker.protocol.messages import (
        AlterUserScramCredentialsRequest,
        DescribeUserScramCredentialsRequest,
    )
    from broker.protocol.messages.alter_user_scram_credentials_request import (
        ScramCredentialUpsertion,
    )
    from broker.security.scram_credentials import CREDENTIALS_FILE, ScramCredentialStore

    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    authorizer = StandardAuthorizer([cluster_acl(Op.ALTER)])  # ALTER implies DESCRIBE
    alter = AlterUserScramCredentialsHandler(store, authorizer=authorizer)
    describe = DescribeUserScramCredentialsHandler(store, authorizer=authorizer)
    salt = b"twenty-bytes-of-salt"
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    body = AlterUserScramCredentialsRequest(
        upsertions=(ScramCredentialUpsertion("carol", 1, 4096, salt, salted),)
    )
    refused = await alter.handle(make_request(body, 51, 0, principal=BOB))
    assert [r.error_code for r in refused.results] == [CAF]
    assert store.get("carol", "SCRAM-SHA-256") is None
    done = await alter.handle(make_request(body, 51, 0))
    assert [r.error_code for r in done.results] == [ErrorCode.NONE]
    hidden = await describe.handle(
        make_request(DescribeUserScramCredentialsRequest(users=None), 50, 0, principal=BOB)
    )
    assert hidden.error_code == CAF
    shown = await describe.handle(
        make_request(DescribeUserScramCredentialsRequest(users=None), 50, 0)
    )
    assert [r.user for r in shown.results] == ["carol"]
