"""ACLs shared by the processes of a cluster: changes build on each other and are followed."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.cluster.shared_acls import SharedAclStore
from broker.handlers.create_acls import CreateAclsHandler
from broker.handlers.delete_acls import DeleteAclsHandler
from broker.protocol.messages import CreateAclsRequest, DeleteAclsRequest
from broker.protocol.messages.delete_acls_request import DeleteAclsFilter
from broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from broker.security.authorizer import StandardAuthorizer
from tests.handlers.request_factory import ALICE, BOB, make_request
from tests.handlers.test_data_api_authorization import cluster_acl, creation
from tests.waiting import wait_until


class Process:
    """What one process of the cluster holds: its authorizer and its view of the file."""

    def __init__(self, log_dir: Path) -> None:
        self.authorizer = StandardAuthorizer([cluster_acl(AclOperation.ALTER)])
        self.store = SharedAclStore(log_dir, poll_interval_s=0.01, authorizer=self.authorizer)
        self.create = CreateAclsHandler(self.authorizer, self.store)
        self.delete = DeleteAclsHandler(self.authorizer, self.store)

    def may_read(self, principal: str, topic: str) -> bool:
        return self.authorizer.authorize(
            principal, "h", AclOperation.READ, ResourceType.TOPIC, topic
        )


async def create(process: Process, topic: str, principal: str = BOB) -> None:
    body = CreateAclsRequest(creations=(creation(topic, principal=principal),))
    response = await process.create.handle(make_request(body, 30, 3))
    assert [r.error_code for r in response.results] == [0]


async def test_a_change_made_by_a_stale_process_keeps_the_other_processes_change(
    tmp_path: Path,
) -> None:
    first, second = Process(tmp_path), Process(tmp_path)
    await create(first, "orders")
    assert not second.may_read(BOB, "orders")  # not reloaded yet
    await create(second, "payments")
    # The second process re-read the file before writing: both ACLs are stored.
    stored = {b.pattern.name for b in second.store.load()}
    assert {"orders", "payments"} <= stored
    assert second.may_read(BOB, "orders") and second.may_read(BOB, "payments")


async def test_every_process_follows_changes_made_elsewhere(tmp_path: Path) -> None:
    first, second = Process(tmp_path), Process(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(second.store.run)
        await create(first, "orders")
        await wait_until(lambda: second.may_read(BOB, "orders"))
        body = DeleteAclsRequest(
            filters=(
                DeleteAclsFilter(
                    resource_type_filter=ResourceType.TOPIC,
                    resource_name_filter="orders",
                    pattern_type_filter=PatternType.LITERAL,
                    principal_filter=None,
                    host_filter=None,
                    operation=AclOperation.ANY,
                    permission_type=AclPermissionType.ANY,
                ),
            )
        )
        await first.delete.handle(make_request(body, 31, 3))
        await wait_until(lambda: not second.may_read(BOB, "orders"))
        nursery.cancel_scope.cancel()
    assert not second.may_read(ALICE, "orders")
