"""Each transaction API asks the authorizer what Kafka's KafkaApis asks: WRITE (or
DESCRIBE) on the transactional id, WRITE on topics added, READ on the group and
its topics, READ on topics described."""

from __future__ import annotations

from pathlib import Path

from broker.handlers.add_offsets_to_txn import AddOffsetsToTxnHandler
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.end_txn import EndTxnHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)
from broker.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from broker.security.acl import AclBinding, AclOperation, ResourceType
from broker.security.authorizer import StandardAuthorizer
from tests.handlers.fake_log import FakeLog, FakeTopic
from tests.handlers.request_factory import BOB, make_request
from tests.security.acl_strategies import acl
from tests.transaction.helpers import make_coordinator

Op = AclOperation
TXN = ResourceType.TRANSACTIONAL_ID
E = ErrorCode


def tid_acl(name: str, operation: AclOperation) -> AclBinding:
    return acl(name, operation, resource_type=TXN)


async def test_init_producer_id_needs_write_on_the_transactional_id(tmp_path: Path) -> None:
    coordinator = make_coordinator(tmp_path)
    handler = InitProducerIdHandler(
        FakeLog(),
        coordinator,
        authorizer=StandardAuthorizer([tid_acl("mine", Op.WRITE)]),
    )

    async def init(tid: str, version: int = 4) -> int:
        body = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=1000)
        return int((await handler.handle(make_request(body, 22, version))).error_code)

    assert await init("mine") == E.NONE
    assert await init("theirs") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert set(coordinator.transactions) == {"mine"}


async def test_add_partitions_needs_write_on_the_id_and_on_each_topic(tmp_path: Path) -> None:
    coordinator = make_coordinator(tmp_path)
    init = await coordinator.init_producer_id("tx", 1000)
    log = FakeLog(FakeTopic("mine", 1), FakeTopic("theirs", 1))
    authorizer = StandardAuthorizer([tid_acl("tx", Op.WRITE), acl("mine", Op.WRITE)])
    handler = AddPartitionsToTxnHandler(coordinator, log, authorizer=authorizer)

    async def add(*topics: str, principal: str = "User:alice") -> dict[str, int]:
        body = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=tuple(
                AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in topics
            ),
        )
        response = await handler.handle(make_request(body, 24, 3, principal=principal))
        return {
            t.name: t.results_by_partition[0].partition_error_code
            for t in response.results_by_topic_v3_and_below
        }

    assert await add("mine", "theirs") == {
        "mine": E.OPERATION_NOT_ATTEMPTED,
        "theirs": E.TOPIC_AUTHORIZATION_FAILED,
    }
    assert await add("mine", principal=BOB) == {"mine": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert coordinator.transactions["tx"].partitions == set()
    assert await add("mine") == {"mine": E.NONE}
    assert await add("mine", "missing") == {
        "mine": E.OPERATION_NOT_ATTEMPTED,
        "missing": E.TOPIC_AUTHORIZATION_FAILED,
    }


async def test_add_offsets_needs_write_on_the_id_and_read_on_the_group(tmp_path: Path) -> None:
    coordinator = make_coordinator(tmp_path)
    init = await coordinator.init_producer_id("tx", 1000)
    authorizer = StandardAuthorizer(
        [tid_acl("tx", Op.WRITE), acl("g", Op.READ, resource_type=ResourceType.GROUP)]
    )
    handler = AddOffsetsToTxnHandler(coordinator, authorizer=authorizer)

    async def add(group: str, principal: str = "User:alice") -> int:
        body = AddOffsetsToTxnRequest(
            transactional_id="tx",
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            group_id=group,
        )
        return int(
            (await handler.handle(make_request(body, 25, 3, principal=principal))).error_code
        )

    assert await add("other") == E.GROUP_AUTHORIZATION_FAILED
    assert await add("g", principal=BOB) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert await add("g") == E.NONE


async def test_end_txn_needs_write_and_old_clients_see_invalid_producer_epoch(
    tmp_path: Path,
) -> None:
    coordinator = make_coordinator(tmp_path)
    init = await coordinator.init_producer_id("tx", 1000)
    await coordinator.init_producer_id("tx", 1000)  # fences init's epoch
    handler = EndTxnHandler(coordinator, authorizer=StandardAuthorizer([tid_acl("tx", Op.WRITE)]))

    async def end(version: int, principal: str = "User:alice") -> int:
        body = EndTxnRequest(
            transactional_id="tx",
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            committed=True,
        )
        response = await handler.handle(make_request(body, 26, version, principal=principal))
        return int(response.error_code)

    assert await end(3, principal=BOB) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert await end(3) == E.PRODUCER_FENCED
    assert await end(1) == E.INVALID_PRODUCER_EPOCH


async def test_describe_and_list_show_only_describable_transactional_ids(tmp_path: Path) -> None:
    coordinator = make_coordinator(tmp_path)
    for tid in ("mine", "theirs"):
        await coordinator.init_producer_id(tid, 1000)
    authorizer = StandardAuthorizer([tid_acl("mine", Op.DESCRIBE)])
    describe = DescribeTransactionsHandler(coordinator, authorizer=authorizer)
    listing = ListTransactionsHandler(coordinator, authorizer=authorizer)
    described = await describe.handle(
        make_request(DescribeTransactionsRequest(transactional_ids=("mine", "theirs")), 65, 0)
    )
    assert [s.error_code for s in described.transaction_states] == [
        E.NONE,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ]
    listed = await listing.handle(make_request(ListTransactionsRequest(), 66, 1))
    assert [s.transactional_id for s in listed.transaction_states] == ["mine"]
