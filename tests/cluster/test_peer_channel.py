"""WriteTxnMarkers between the processes of a cluster: over a client listener it needs
CLUSTER_ACTION, as in Kafka; over the private Unix socket the processes share (an
internal listener of the SocketServer) it is the cluster's own request, allowed with
ACLs on and no ACL for it, and answered through the same middleware as a client's."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from broker.client.connection import KafkaConnection
from broker.cluster.peer_channel import PeerClient, socket_path
from broker.errors import PeerUnavailable
from broker.handlers.api_versions import ApiVersionsHandler
from broker.handlers.write_txn_markers import GROUP_MARKER_TOPIC, WriteTxnMarkersHandler
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ApiVersionsRequest, MetadataRequest
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.security.authorizer import StandardAuthorizer
from broker.transaction.marker_router import marker_request
from tests.cluster.peer_server import client_listener_chain, serving_peer
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


def handler(local: FakeLocal) -> WriteTxnMarkersHandler:
    return WriteTxnMarkersHandler(
        local,  # type: ignore[arg-type]  # the two methods the handler calls
        lambda shard: shard == 1,
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
    denied = await client_listener_chain(handler(local), StandardAuthorizer([]))(
        make_request(request, 27, 1)
    )
    assert set(results(denied).values()) == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert local.partitions == [] and local.groups == []
    allowed = StandardAuthorizer(
        [acl(CLUSTER_NAME, AclOperation.CLUSTER_ACTION, resource_type=ResourceType.CLUSTER)]
    )
    granted = await client_listener_chain(handler(local), allowed)(make_request(request, 27, 1))
    assert results(granted) == {("t", 0): ErrorCode.NONE, (GROUP_MARKER_TOPIC, 1): ErrorCode.NONE}
    assert local.partitions == [(9, True, "t", 0)]
    assert local.groups == [(9, True)]


async def test_the_processes_private_socket_is_allowed_with_acls_on(socket_dir: Path) -> None:
    local = FakeLocal()
    client = PeerClient(socket_dir, 1)
    async with serving_peer(socket_dir, 2, StandardAuthorizer([]), handler(local)):
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
    assert not socket_path(socket_dir, 2).exists()


class FailingLocal(FakeLocal):
    async def write_partition_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        topic: str,
        index: int,
        coordinator_epoch: int = 0,
    ) -> None:
        raise RuntimeError("a bug in the marker writer")


async def test_a_handler_failing_on_the_private_channel_answers_unknown_server_error(
    socket_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The private channel used to drop the connection (PeerUnavailable) when a handler
    raised; it now answers as a client listener does, with the API's error response."""
    client = PeerClient(socket_dir, 1)
    async with serving_peer(socket_dir, 2, StandardAuthorizer([]), handler(FailingLocal())):
        response = await client.send(2, marker_request(9, 1, True, [("t", 0)], []))
        assert results(response) == {("t", 0): ErrorCode.UNKNOWN_SERVER_ERROR}
        # The connection stays usable.
        again = await client.send(2, marker_request(9, 1, True, [("t", 1)], []))
        assert results(again) == {("t", 1): ErrorCode.UNKNOWN_SERVER_ERROR}
        await client.aclose()
    logged = [r for r in caplog.records if "a bug in the marker writer" in str(r.exc_info)]
    assert len(logged) == 2  # once per request


async def test_the_private_channel_closes_on_an_api_it_does_not_serve(socket_dir: Path) -> None:
    """Only the inter-process APIs are served there, as before: anything else closes."""
    client = PeerClient(socket_dir, 1)
    async with serving_peer(socket_dir, 2, StandardAuthorizer([]), handler(FakeLocal())):
        with pytest.raises(PeerUnavailable):
            await client.request(2, MetadataRequest(topics=()), 12, timeout_s=10)
        await client.aclose()


async def test_the_private_channel_is_not_counted_against_the_client_listeners_limits(
    socket_dir: Path,
) -> None:
    """With max.connections=1, a process's open private connection leaves the one slot
    to a client (it is counted apart, as Kafka's inter-broker listener is not starved)."""
    peer = PeerClient(socket_dir, 1)
    versions = ApiVersionsHandler(lambda: {18: (0, 4)})
    async with serving_peer(
        socket_dir,
        2,
        StandardAuthorizer([]),
        handler(FakeLocal()),
        versions,
        overrides={"max.connections": "1"},
    ) as server:
        await peer.send(2, marker_request(9, 1, True, [("t", 0)], []))  # stays open
        with trio.fail_after(10):
            client = await KafkaConnection.connect("127.0.0.1", server.bound_ports["PLAINTEXT"])
            answer = await client.request(ApiVersionsRequest(), 0)
        assert answer.error_code == ErrorCode.NONE
        # Still the only listener of the limits: not made "protected" (let past them).
        assert not server.quotas.is_protected("PLAINTEXT")
        await client.aclose()
        await peer.aclose()
