"""One broker process's membership in the cluster: wiring into KafkaServer.

`ClusterMember` is created by `KafkaServer` when it runs under the supervisor
(`broker serve --process-index I`). It swaps the log for a
`ClusterLogManager`, makes Metadata and DescribeCluster list every live
process, answers FindCoordinator with the coordinator process of a group or
transactional id, refuses group and transaction operations another process
coordinates (NOT_COORDINATOR, which makes clients look the coordinator up
again), and routes transaction markers to the leading processes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import trio

from broker.broker_context import BrokerContext, Service
from broker.cluster.cluster_image import ClusterImage
from broker.cluster.cluster_log_manager import ClusterLogManager
from broker.cluster.group_shards import SHARDS as GROUP_SHARDS
from broker.cluster.marker_router import RoutingMarkerWriter
from broker.cluster.metadata_store import SqliteMetadataStore
from broker.cluster.peer_channel import PeerClient
from broker.cluster.placement import coordinator_shard
from broker.cluster.remote_partition import RemotePartition
from broker.cluster.shard_layout import ShardLayout
from broker.cluster.shared_acls import SharedAclStore
from broker.cluster.shared_file import SharedFileFollower
from broker.cluster.transaction_shards import transaction_shard_dir
from broker.cluster.txn_verification import TransactionVerifier
from broker.config import BrokerConfig
from broker.coordinator.coordinator_service import GroupCoordinatorService
from broker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore
from broker.errors import KafkaError
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.log_topics import LogTopicSource
from broker.handlers.log_view import TopicView
from broker.handlers.metadata import MetadataHandler
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.metadata_response import (
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.security.scram_credentials import ScramCredentialStore
from broker.transaction.marker_writer import LocalMarkerWriter
from broker.wiring.transaction_coordinator import TransactionPlacement

if TYPE_CHECKING:
    from broker.server import KafkaServer  # the process lifecycle below, not its wiring

log = logging.getLogger(__name__)

PEER_SOCKET_DIR_KEY = "peer.socket.dir"
"""The metadata store's key for the directory of the processes' private sockets."""


def resolve_process_count(config: BrokerConfig) -> int:
    """`process.count`, where 0 means one process per core this process may use."""
    count = config.cluster.process_count
    if count > 0:
        return count
    return max(len(os.sched_getaffinity(0)), 1)


async def stop_when_supervisor_exits(server: KafkaServer) -> None:
    """The supervisor holds the write end of this process's stdin and never writes to it:
    end of file means it is gone, even killed with SIGKILL, so no broker process outlives
    it holding ports and partitions."""
    async with trio.lowlevel.FdStream(os.dup(0)) as stdin:
        while await stdin.receive_some(4096):
            pass
    log.warning("the supervisor is gone; shutting down")
    server.shutdown()


def shard_dir(log_dir: Path, shard: int) -> Path:
    """The directory of the group offsets of coordinator shard `shard`."""
    return ShardLayout(log_dir, GROUP_SHARDS).shard_dir(shard)


class ClusterMember:
    def __init__(self, config: BrokerConfig, process_index: int) -> None:
        self.config = config
        self.process_count = resolve_process_count(config)
        self.index = process_index
        self.node_id = config.node_id
        self.base_node_id = self.node_id - process_index
        self.log_dir = Path(config.log_dirs[0])
        self.store = SqliteMetadataStore(self.log_dir)
        poll_interval_s = config.cluster.metadata_poll_interval_ms / 1000
        self.log_manager = ClusterLogManager(
            config, self.store, self.node_id, poll_interval_s=poll_interval_s
        )
        self.acls = SharedAclStore(self.log_dir, poll_interval_s)
        self.poll_interval_s = poll_interval_s
        peer_dir = self.store.get(PEER_SOCKET_DIR_KEY)
        # Set by the supervisor; a short path, as Unix socket paths are (108 bytes).
        self.peer_dir = Path(peer_dir) if peer_dir is not None else self.log_dir / ".peers"
        self.local_markers: LocalMarkerWriter | None = None

    @property
    def image(self) -> ClusterImage:
        return self.log_manager.image

    def brokers(self, listener_name: str) -> list[tuple[int, str, int]]:
        result = []
        for broker in self.image.alive_brokers():
            endpoint = broker.endpoints.get(listener_name)
            if endpoint is not None:
                result.append((broker.node_id, *endpoint))
        return result

    def registered_brokers(self) -> int:
        """The live processes, as Metadata lists them (Kafka's registered brokers)."""
        return len(self.image.alive_brokers())

    def controller_id(self) -> int:
        """The lowest live node: the store serialises writes, any process may write."""
        alive = self.image.alive_brokers()
        return alive[0].node_id if alive else self.node_id

    def coordinator_node(self, group_id: str) -> int:
        return self.base_node_id + coordinator_shard(group_id, self.process_count)

    def owns_transaction(self, transactional_id: str) -> bool:
        """Transactional ids are placed by the groups' rule (Kafka hashes both onto
        the partitions of their topic, `__transaction_state` and `__consumer_offsets`)."""
        return self.coordinator_node(transactional_id) == self.node_id

    def owns_group_shard(self, shard: int) -> bool:
        return shard == self.index

    def leader_of(self, topic: str, partition: int) -> int | None:
        found = self.image.topics.get(topic)
        if found is None or not 0 <= partition < len(found.leaders):
            return None
        return found.leaders[partition]

    def transaction_placement(self, local: LocalMarkerWriter) -> TransactionPlacement:
        """This process's transaction coordinator: its shard of the ids and its journal,
        markers routed to the leading processes over the private channel."""
        self.local_markers = local  # Produce's verifier listens to its markers
        markers = RoutingMarkerWriter(
            local,
            PeerClient(self.peer_dir, self.node_id),
            my_node=self.node_id,
            leader_of=self.leader_of,
            group_shard=lambda group_id: coordinator_shard(group_id, self.process_count),
            base_node=self.base_node_id,
        )
        return TransactionPlacement(
            journal_dir=transaction_shard_dir(self.log_dir, self.index),
            markers=markers,
            owns=self.owns_transaction,
            owns_group_shard=self.owns_group_shard,
            single_process=False,
        )

    def locate_group(self, group_id: str, listener_name: str) -> tuple[int, str, int] | None:
        node = self.coordinator_node(group_id)
        if not self.image.is_alive(node):
            return None
        endpoint = self.image.endpoint(node, listener_name)
        return None if endpoint is None else (node, *endpoint)

    def topic_source(self) -> ClusterTopicSource:
        return ClusterTopicSource(self.log_manager, self)

    def coordinator_service(self, config: CoordinatorConfig) -> ShardedCoordinatorService:
        return ShardedCoordinatorService(config, shard_dir(self.log_dir, self.index), self)

    async def announce(self, server: KafkaServer) -> None:
        """Register this process's endpoints: it now serves, clients may come."""
        endpoints = {
            e.listener_name: server.socket_server.advertised_endpoint(e.listener_name)
            for e in server.config.listeners
        }
        await _to_thread(self.store.register_broker, self.node_id, endpoints)
        await self.log_manager.refresh()
        log.info("node %d registered in the cluster at %s", self.node_id, endpoints)


async def _to_thread(function: Any, *args: Any) -> Any:
    return await trio.to_thread.run_sync(function, *args)


class ClusterTopicSource(LogTopicSource):
    """Metadata's topics with each partition's real leader; a partition whose leader
    is down is LEADER_NOT_AVAILABLE (leader -1), as Kafka reports an offline one."""

    def __init__(self, log_manager: ClusterLogManager, member: ClusterMember) -> None:
        super().__init__(log_manager, member.node_id)
        self._member = member

    def describe(self, topic: TopicView, operations: int) -> MetadataResponseTopic:
        image = self._member.image
        partitions = []
        for p in topic.partitions:
            leader = p.leader if isinstance(p, RemotePartition) else self._member.node_id
            if image.is_alive(leader):
                partitions.append(
                    MetadataResponsePartition(
                        error_code=ErrorCode.NONE,
                        partition_index=p.partition,
                        leader_id=leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=(leader,),
                        isr_nodes=(leader,),
                        offline_replicas=(),
                    )
                )
            else:
                partitions.append(
                    MetadataResponsePartition(
                        error_code=ErrorCode.LEADER_NOT_AVAILABLE,
                        partition_index=p.partition,
                        leader_id=-1,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=(leader,),
                        isr_nodes=(),
                        offline_replicas=(leader,),
                    )
                )
        return MetadataResponseTopic(
            error_code=ErrorCode.NONE,
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=topic.is_internal or topic.name.startswith("__"),
            partitions=tuple(partitions),
            topic_authorized_operations=operations,
        )


class ShardedCoordinatorService(GroupCoordinatorService):
    """The coordinator of the groups that hash to this process; its offsets journal is
    the shard's directory, which the supervisor re-shards when the process count
    changes (broker/cluster/group_shards.py)."""

    def __init__(self, config: CoordinatorConfig, directory: Path, member: ClusterMember) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        super().__init__(config, directory)
        self._member = member

    @property
    def coordinator(self) -> GroupCoordinator:
        """OffsetFetch reads the coordinator directly: answer NOT_COORDINATOR there too."""
        return cast(GroupCoordinator, _ShardView(super().coordinator, self._member))

    def _check(self, group_id: str) -> None:
        node = self._member.coordinator_node(group_id)
        if node != self._member.node_id:
            raise KafkaError(
                ErrorCode.NOT_COORDINATOR, f"group {group_id!r} is coordinated by broker {node}"
            )

    def join(self, group_id: str, *args: Any, **kwargs: Any) -> None:
        self._check(group_id)
        super().join(group_id, *args, **kwargs)

    def sync(self, group_id: str, *args: Any, **kwargs: Any) -> None:
        self._check(group_id)
        super().sync(group_id, *args, **kwargs)

    def heartbeat(self, group_id: str, *args: Any, **kwargs: Any) -> ErrorCode:
        self._check(group_id)
        return super().heartbeat(group_id, *args, **kwargs)

    def leave(self, group_id: str, *args: Any, **kwargs: Any) -> tuple[ErrorCode, list[ErrorCode]]:
        self._check(group_id)
        return super().leave(group_id, *args, **kwargs)

    def validate_transactional_commit(self, group_id: str, *args: Any, **kwargs: Any) -> Any:
        self._check(group_id)
        return super().validate_transactional_commit(group_id, *args, **kwargs)

    def add_transactional_offsets(self, group_id: str, *args: Any, **kwargs: Any) -> Any:
        self._check(group_id)
        return super().add_transactional_offsets(group_id, *args, **kwargs)

    def commit_offsets(self, group_id: str, *args: Any, **kwargs: Any) -> Any:
        self._check(group_id)
        return super().commit_offsets(group_id, *args, **kwargs)

    def delete_offsets(self, group_id: str, *args: Any, **kwargs: Any) -> Any:
        self._check(group_id)
        return super().delete_offsets(group_id, *args, **kwargs)

    def consumer_group_heartbeat(self, group_id: str, *args: Any, **kwargs: Any) -> Any:
        self._check(group_id)
        return super().consumer_group_heartbeat(group_id, *args, **kwargs)

    def consumer_group(self, group_id: str) -> Any:
        self._check(group_id)
        return super().consumer_group(group_id)

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        mine = [g for g in group_ids if self._member.coordinator_node(g) == self._member.node_id]
        result = super().delete_groups(mine)
        for group_id in group_ids:
            result.setdefault(group_id, ErrorCode.NOT_COORDINATOR)
        return result


def wire_cluster_member(
    context: BrokerContext,
    member: ClusterMember,
    metadata: MetadataHandler,
    credentials: ScramCredentialStore,
    quotas: QuotaManagers,
    broker_configs: BrokerConfigs,
) -> list[Service]:
    """After the subsystems are added: list every live process where Kafka lists brokers,
    locate groups and transactional ids by hash; returns the services that follow the
    shared files and Produce's verification against the other processes."""
    from broker.handlers.describe_cluster import DescribeClusterHandler
    from broker.handlers.group_handlers import FindCoordinatorHandler
    from broker.handlers.produce import ProduceHandler

    member.acls.authorizer = context.authorizer
    metadata.cluster_brokers = member.brokers
    metadata.controller_id = member.controller_id
    describe = context.apis.handler(DescribeClusterHandler.api_key)
    if isinstance(describe, DescribeClusterHandler):
        describe.cluster_brokers = member.brokers
        describe.controller_id = member.controller_id
    find = context.apis.handler(FindCoordinatorHandler.api_key)
    if isinstance(find, FindCoordinatorHandler):
        find.locate_group = member.locate_group
        find.locate_transaction = member.locate_group
    services: list[Service] = [member.acls]
    produce = context.apis.handler(ProduceHandler.api_key)
    if isinstance(produce, ProduceHandler) and produce.transaction_verifier is not None:
        verifier = TransactionVerifier(
            PeerClient(member.peer_dir, member.node_id),
            my_node=member.node_id,
            coordinator_node=member.coordinator_node,
            local=produce.transaction_verifier,
        )
        produce.transaction_verifier = verifier
        if member.local_markers is not None:
            member.local_markers.marker_listeners.append(verifier.on_marker)
        services.append(verifier)
    # The private channel is the process's internal listener (peer_channel.peer_listener,
    # served by the SocketServer): WriteTxnMarkers and AddPartitionsToTxn v4 from the others.
    return [
        *services,
        *shared_file_followers(context, member, credentials, quotas, broker_configs),
    ]


class _ShardView:
    """The coordinator as the offset handlers read it, refusing another process's groups."""

    def __init__(self, coordinator: GroupCoordinator, member: ClusterMember) -> None:
        self._coordinator = coordinator
        self._member = member

    def fetch_offsets(self, group_id: str, partitions: Any) -> Any:
        if self._member.coordinator_node(group_id) != self._member.node_id:
            return ErrorCode.NOT_COORDINATOR, []
        return self._coordinator.fetch_offsets(group_id, partitions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._coordinator, name)


def shared_file_followers(
    context: BrokerContext,
    member: ClusterMember,
    credentials: ScramCredentialStore,
    quotas: QuotaManagers,
    broker_configs: BrokerConfigs,
) -> list[SharedFileFollower]:
    """SCRAM credentials, client quotas and dynamic broker configs changed through
    another process reach this one within the poll interval (see
    broker/cluster/shared_file.py)."""
    quota_store = QuotaStore(context.log_dirs[0])
    config_store = DynamicBrokerConfigStore(context.log_dirs[0])

    async def reload_credentials() -> None:
        await trio.to_thread.run_sync(credentials.reload)

    async def reload_quotas() -> None:
        stored = await trio.to_thread.run_sync(quota_store.load)
        for entity in {entity for entity, _ in quotas.configs} | set(stored):
            quotas.set_quotas(entity, stored.get(entity, {}))

    async def reload_broker_configs() -> None:
        # The cluster default and this node's layer; the others' layers are theirs.
        await broker_configs.apply_stored(await trio.to_thread.run_sync(config_store.load))

    interval_s = member.poll_interval_s
    return [
        SharedFileFollower(credentials.path, reload_credentials, interval_s),
        SharedFileFollower(quota_store.path, reload_quotas, interval_s),
        SharedFileFollower(config_store.path, reload_broker_configs, interval_s),
    ]
