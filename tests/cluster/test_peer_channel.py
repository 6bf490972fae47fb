"""WriteTxnMarkers between the processes of a cluster: over a client listener it needs
CLUSTER_ACTION, as in Kafka; over the private Unix socket the processes share it
is the cluster's own request, allowed with ACLs on and no ACL for it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from broker.cluster.marker_router import marker_request
from broker.cluster.peer_channel import PeerClient, PeerServer, PeerUnavailable, socket_path
from broker.handlers.write_txn_markers import GROUP_MARKER_TOPIC, WriteTxnMarkersHandler
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.security.authorizer import StandardAuthorizer
from tests.cluster.test_marker_router import FakeLocal
from tests.handlers.request_factory import make_request
from tests.security.acl_strategies import acl


def results(response: WriteTxnMarkersResponse) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.error_code
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    }


def handler(local: FakeLocal, authorizer: StandardAuthorizer) -> WriteTxnMarkersHandler:
    return WriteTxnMarkersHandler(
        local,  # type: ignore[arg-type]  # the two methods the handler calls
        lambda shard: shard == 1,
        authorizer=authorizer,
    )


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """Short, like the supervisor's: Unix socket paths are limited to 108 bytes."""
    directory = Path(tempfile.mkdtemp(prefix="broker-peers-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


async def test_over_a_client_listener_write_txn_markers_needs_cluster_action() -> None:
    request = marker_request(9, 1, True, [("t", 0)], [1])
    local = FakeLocal()
    denied = await handler(local, StandardAuthorizer([])).handle(make_request(request, 27, 1))
    assert set(results(denied).values()) == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert local.partitions == [] and local.groups == []
    allowed = StandardAuthorizer(
        [acl(CLUSTER_NAME, AclOperation.CLUSTER_ACTION, resource_type=ResourceType.CLUSTER)]
    )
    granted = await handler(local, allowed).handle(make_request(request, 27, 1))
    assert results(granted) == {("t", 0): ErrorCode.NONE, (GROUP_MARKER_TOPIC, 1): ErrorCode.NONE}
    assert local.partitions == [(9, True, "t", 0)]
    assert local.groups == [(9, True)]


async def test_the_processes_private_socket_is_allowed_with_acls_on(socket_dir: Path) -> None:
    local = FakeLocal()
    server = PeerServer(socket_path(socket_dir, 2), handler(local, StandardAuthorizer([])))
    client = PeerClient(socket_dir, 1)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        response = await client.send(2, marker_request(9, 1, False, [("t", 0), ("t", 3)], [1, 2]))
        assert results(response) == {
            ("t", 0): ErrorCode.NONE,
            ("t", 3): ErrorCode.NONE,
            (GROUP_MARKER_TOPIC, 1): ErrorCode.NONE,
            (GROUP_MARKER_TOPIC, 2): ErrorCode.NOT_COORDINATOR,  # another process's shard
        }
        assert local.partitions == [(9, False, "t", 0), (9, False, "t", 3)]
        assert local.groups == [(9, False)]
        with pytest.raises(PeerUnavailable):
            await client.send(3, marker_request(9, 1, False, [("t", 1)], []))
        await client.aclose()
        nursery.cancel_scope.cancel()
    assert not socket_path(socket_dir, 2).exists()
