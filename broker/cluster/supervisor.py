"""The supervisor: `broker serve` with `process.count` > 1.

It prepares the shared state while no broker runs (locks the log dirs, fixes
the cluster id, brings the metadata store in line with the configured
processes and the data dir, re-shards group offsets and transaction state,
makes the directory of the processes' private sockets), then runs one
`broker serve --process-index I` per process with `trio.run_process`, each
with its own `node.id` (`node.id + I`) and ports (each listener's port + I;
port 0 stays ephemeral). It reports ready once every process is registered
in the store, restarts a process that dies (its partitions are
LEADER_NOT_AVAILABLE until it is back; one that keeps dying right after its
start waits twice as long each time, up to 30 s), and on SIGTERM/SIGINT stops them all
with SIGTERM, waiting `broker.shutdown.timeout.ms` (plus a grace period for
the processes to exit) before killing what is left. A process that fails
before it was ever ready (a port in use, a bad log dir) fails the start-up.

While it runs it mirrors the store's topics into `__topics.json`, so that a
single-process broker started on the same data dir later finds them.

With `zookeeper.connect` the host is one among hosts, and ZooKeeper is the metadata
store: each process is a whole ZooKeeper broker (broker/hosts/) with its own log dir,
`node-<id>` under each entry of `log.dirs`. The supervisor makes no metadata store,
private channel or shards; it locks the log dirs, reports ready once every process is
registered in ZooKeeper, and restarts a process that died once ZooKeeper has ended its
old session (`broker/cluster/zookeeper_registrations.py`). SIGTERM is each process's
controlled shutdown. The HTTP port is the supervisor's as in the one-host cluster: every
process's /metrics read from its Unix socket (`--metrics-socket`, in a private directory
made for them alone), its consumer lag completed with the log ends of partitions led on
other hosts (asked through the Kafka API), and the console speaking Kafka to the lowest
registered process.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import trio

from broker.cluster.cluster_log_ends import ClusterLogEnds, open_routing_session
from broker.cluster.cluster_metrics import ClusterMetrics, metrics_socket
from broker.cluster.group_shards import reshard_group_offsets
from broker.cluster.member import PEER_SOCKET_DIR_KEY
from broker.cluster.metadata_store import SqliteMetadataStore
from broker.cluster.process_ports import process_listener_overrides
from broker.cluster.transaction_shards import reshard_transaction_state
from broker.cluster.zookeeper_registrations import ZooKeeperRegistrations
from broker.config import BrokerConfig, ConfigError
from broker.config_error import CONFIG_ERROR_EXIT_CODE
from broker.console.console_service import connect_host, http_port_for
from broker.coordination.store import CoordinationError, CoordinationUnavailable
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LOCK_FILE, LogDirInUseError
from broker.log.topic_store import TopicRecord, TopicStore
from broker.meta_properties import META_PROPERTIES, load_or_create_cluster_id
from broker.wiring.cluster_membership import zookeeper_settings

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
RESTART_DELAY_S = 0.5
MAX_RESTART_DELAY_S = 30.0
STABLE_AFTER_S = 30.0
EXIT_GRACE_S = 5.0
REGISTRATION_POLL_S = 0.05
MAX_PARTITIONS_NAMED = 100
"""Partitions named in the one line about a removed process (the rest counted)."""


PEER_DIR_PREFIX = "broker-peers-"


class StartupError(RuntimeError):
    """The cluster could not start; the message says which process and why."""


def restart_delay(previous: float | None, quick: bool) -> float:
    """The wait before restarting a process that died: RESTART_DELAY_S, doubled (up to
    MAX_RESTART_DELAY_S) each time it dies again within STABLE_AFTER_S of its start."""
    if previous is None or not quick:
        return RESTART_DELAY_S
    return min(previous * 2, MAX_RESTART_DELAY_S)


class ProcessConfigError(StartupError):
    """A process stopped on a configuration error before it was ever ready: it logged
    the one line that says which key, so the supervisor adds none and exits as it did."""


PROCESS_LOG_DIR_PREFIX = "node-"


def process_log_dirs(config: BrokerConfig, node_id: int) -> list[Path]:
    """A process's own log dirs on a host among hosts: `node-<id>` under each entry."""
    return [Path(d) / f"{PROCESS_LOG_DIR_PREFIX}{node_id}" for d in config.log_dirs]


def process_overrides(config: BrokerConfig, index: int) -> dict[str, str]:
    """The settings that differ between the processes of one cluster (on a host among
    hosts also the log dirs, each process being a whole broker)."""
    node_id = config.node_id + index
    overrides = {"node.id": str(node_id)}
    overrides |= process_listener_overrides(config, index)
    if config.cluster.zookeeper_connect is not None:
        overrides["log.dirs"] = ",".join(str(d) for d in process_log_dirs(config, node_id))
    return overrides


def private_socket_dir(stale: str | None) -> Path:
    """A new directory for the processes' private sockets: a short path (socket paths are
    limited to 108 bytes) that only this user may enter. `stale`, one left by a
    supervisor that was killed, goes now: the log dir locks say it is over."""
    if stale is not None and Path(stale).name.startswith(PEER_DIR_PREFIX):
        shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=PEER_DIR_PREFIX))


def check_process_configs(config: BrokerConfig, count: int) -> None:
    """Each process's config (with its own node id and ports) is valid, checked by the
    supervisor so that an error is reported once, not by every process it starts."""
    for index in range(1, count):
        try:
            config.with_updates(process_overrides(config, index))
        except ConfigError as exc:
            raise ConfigError(f"{exc} (for process {index} of the cluster)") from None


class Supervisor:
    def __init__(
        self,
        config: BrokerConfig,
        config_path: str | None,
        overrides: Sequence[str],
        log_level: str,
    ) -> None:
        self.config = config
        self.count = config.cluster.processes
        self.base_node_id = config.node_id
        self.nodes = [self.base_node_id + i for i in range(self.count)]
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self._command = [sys.executable, "-m", "broker", "serve", "--log-level", log_level]
        if config_path is not None:
            self._command.append(config_path)
        for override in overrides:
            self._command += ["--override", override]
        self._lock_fds: list[int] = []
        self._stopping = False
        self._ever_ready = [False] * self.count
        self.processes: list[trio.Process | None] = [None] * self.count
        self.store: SqliteMetadataStore | None = None
        self.peer_dir: Path | None = None
        self.ready = trio.Event()
        self._stop_requested = trio.Event()
        # A host among hosts: ZooKeeper is the metadata store, each process a broker.
        zookeeper = zookeeper_settings(config)
        self.zookeeper = None if zookeeper is None else ZooKeeperRegistrations(zookeeper)
        # One HTTP port for the cluster (or the host): every process's /metrics, and
        # the console.
        self.metrics = ClusterMetrics(self.nodes, self._metrics_socket, self._cluster_ends())
        self.http_port = http_port_for(config, self.metrics, self._listener_address)
        self._addresses: dict[str, str] = {}
        # A host among hosts: each registered process's listeners, as ZooKeeper has them.
        self._registered: dict[int, dict[str, str]] = {}

    def _cluster_ends(self) -> ClusterLogEnds | None:
        """On a host among hosts, the log ends of partitions led elsewhere for the
        consumer lag (broker/cluster/cluster_log_ends.py), asked over a PLAINTEXT
        listener: the supervisor has no login of its own."""
        if self.zookeeper is None or self.config.server.metrics_port < 0:
            return None
        for endpoint in self.config.listeners:
            if endpoint.security_protocol == "PLAINTEXT":
                bootstrap = functools.partial(self._listener_address, endpoint.listener_name)
                return ClusterLogEnds(bootstrap, open_routing_session)
        log.info(
            "consumer lag in /metrics: only partitions this host's processes lead"
            " (no PLAINTEXT listener to ask the others through)"
        )
        return None

    def _metrics_socket(self, node: int) -> Path | None:
        return None if self.peer_dir is None else metrics_socket(self.peer_dir, node)

    def _listener_address(self, listener_name: str) -> str | None:
        """A live process's listener (read from the store when the console connects, so a
        restarted process's new ephemeral port, or another live process, is found; on a
        host among hosts, from the registrations the supervisor has followed)."""
        if self.zookeeper is not None:
            for node in sorted(self._registered):
                address = self._registered[node].get(listener_name)
                if address is not None:
                    return address
            return None
        if self.ready.is_set():
            self._learn_addresses()
        return self._addresses.get(listener_name)

    def _learn_addresses(self) -> None:
        """The listeners of the lowest live process (one indexed read of the store)."""
        assert self.store is not None
        image = self.store.read_image()
        for node in self.nodes:
            broker = image.brokers.get(node)
            if broker is not None and broker.alive:
                self._addresses = {
                    name: f"{connect_host(host)}:{port}"
                    for name, (host, port) in broker.endpoints.items()
                }
                return

    # ------------------------------------------------------------ preparation

    def prepare(self) -> None:
        """Everything that must happen before any process starts (blocking)."""
        if self.zookeeper is not None:
            self._refuse_a_log_at_the_root()
        self._lock_log_dirs()
        if self.zookeeper is not None:
            for node in self.nodes:
                for log_dir in process_log_dirs(self.config, node):
                    log_dir.mkdir(parents=True, exist_ok=True)
            if self.http_port is not None:
                record = self.log_dirs[0] / PEER_SOCKET_DIR_KEY
                stale = record.read_text() if record.exists() else None
                self.peer_dir = private_socket_dir(stale)
                record.write_text(str(self.peer_dir))
            log.info(
                "host of %d broker processes among hosts (ZooKeeper), nodes %d..%d",
                self.count,
                self.nodes[0],
                self.nodes[-1],
            )
            return
        self._prepare_shared_state()

    def _refuse_a_log_at_the_root(self) -> None:
        """A log dir that a single broker or a one-host cluster used holds its log at the
        top: the processes of a host among hosts would not see it (theirs are in
        `node-<id>`) and would come up as empty replicas of partitions whose data sits
        beside them. Refused, so that no one loses a log by raising `process.count`."""
        for log_dir in self.log_dirs:
            if (log_dir / META_PROPERTIES).exists():
                raise ConfigError(
                    f"log.dirs: {log_dir} holds the log of one broker ({META_PROPERTIES} at"
                    f" its top); with zookeeper.connect and process.count={self.count} each"
                    f" process keeps its log in {log_dir}/{PROCESS_LOG_DIR_PREFIX}<node.id>:"
                    f" move that broker's log into its node's directory or use another log dir"
                )

    def removed_nodes(self) -> list[int]:
        """Nodes whose log dir (`node-<id>`) is on this host but that are no longer its
        processes (`process.count` lowered): brokers taken away, as Kafka sees them."""
        found = set()
        for log_dir in self.log_dirs:
            for path in log_dir.glob(f"{PROCESS_LOG_DIR_PREFIX}*"):
                suffix = path.name.removeprefix(PROCESS_LOG_DIR_PREFIX)
                if path.is_dir() and suffix.isdigit() and int(suffix) not in self.nodes:
                    found.add(int(suffix))
        return sorted(found)

    async def report_removed_processes(self) -> None:
        """A removed process stays in its partitions' replica lists, as a Kafka broker
        taken away does, until they are reassigned; each is named here once, at start."""
        assert self.zookeeper is not None
        removed = await trio.to_thread.run_sync(self.removed_nodes)
        if not removed:
            return
        try:
            replicas = await self.zookeeper.replica_of(set(removed))
        except (CoordinationError, CoordinationUnavailable) as exc:
            log.warning(
                "could not read which partitions nodes %s are replicas of: %s", removed, exc
            )
            return
        for node in removed:
            partitions = replicas[node]
            if not partitions:
                continue
            shown = ", ".join(partitions[:MAX_PARTITIONS_NAMED])
            more = len(partitions) - MAX_PARTITIONS_NAMED
            log.warning(
                "node %d is no longer a process of this host (process.count=%d) but is still"
                " a replica of %d partitions, under-replicated until they are reassigned"
                " (AlterPartitionReassignments): %s%s",
                node,
                self.count,
                len(partitions),
                shown,
                f" and {more} more" if more > 0 else "",
            )

    def _lock_log_dirs(self) -> None:
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LogDirInUseError(
                    f"log dir {log_dir} is in use by another broker process"
                ) from None
            self._lock_fds.append(fd)

    def _prepare_shared_state(self) -> None:
        for log_dir in self.log_dirs:
            # The single-process marker would vouch for partitions the cluster writes.
            (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        first = self.log_dirs[0]
        cluster_id = load_or_create_cluster_id(
            first, self.base_node_id, self.config.server.cluster_id
        )
        store = self.store = SqliteMetadataStore(first)
        store.cluster_id(cluster_id)
        previous = store.get("process.count")
        if previous is not None and int(previous) != self.count:
            for log_dir in self.log_dirs:
                for marker in log_dir.glob(CLEAN_SHUTDOWN_FILE + ".node-*"):
                    marker.unlink()
        store.prepare_nodes(self.nodes)
        topics = TopicStore(first).load()
        self._reconcile_topics(store, topics)
        reshard_group_offsets(first, self.count)
        reshard_transaction_state(first, self.count)
        # The processes' private sockets (broker/cluster/peer_channel.py).
        self.peer_dir = private_socket_dir(store.get(PEER_SOCKET_DIR_KEY))
        store.set(PEER_SOCKET_DIR_KEY, str(self.peer_dir))
        log.info(
            "cluster %s: %d processes, nodes %d..%d",
            cluster_id,
            self.count,
            self.nodes[0],
            self.nodes[-1],
        )

    def _reconcile_topics(self, store: SqliteMetadataStore, topics: dict[str, TopicRecord]) -> None:
        """`__topics.json` is what the last broker (single or cluster) left: the store
        follows it, so topics created by a single-process run are adopted (their
        partitions spread over the processes, data left where it is)."""
        image = store.read_image()
        for name, known in image.topics.items():
            record = topics.get(name)
            mirrored = TopicStore(self.log_dirs[0]).path.exists()
            if mirrored and (record is None or record.topic_id != known.topic_id):
                store.delete_topic(name)
        image = store.read_image()
        for name, record in topics.items():
            found = image.topics.get(name)
            if found is None:
                store.create_topic(name, record.topic_id, record.num_partitions, record.configs)
                log.info("adopted topic %s (%d partitions)", name, record.num_partitions)
                continue
            if record.num_partitions > len(found.leaders):
                store.add_partitions(name, record.num_partitions)
            if dict(record.configs) != dict(found.configs):
                store.set_topic_configs(name, record.configs)

    def _mirror_topics(self) -> None:
        assert self.store is not None
        image = self.store.read_image()
        TopicStore(self.log_dirs[0]).save(
            {
                t.name: TopicRecord(t.name, t.topic_id, len(t.leaders), t.configs)
                for t in image.topics.values()
            }
        )

    # ------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await trio.to_thread.run_sync(self.prepare)
            if self.zookeeper is not None:
                await self.zookeeper.connect()
                await self.report_removed_processes()
            async with trio.open_nursery() as nursery:
                for index in range(self.count):
                    nursery.start_soon(self._keep_running, index)
                await self._wait_ready()
                if not self._stop_requested.is_set():
                    log.info("cluster of %d broker processes started", self.count)
                    self.ready.set()
                if self.http_port is not None:
                    await nursery.start(self.http_port.run)
                task_status.started()
                if self.store is not None:
                    nursery.start_soon(self._mirror_loop)
                await self._stop_requested.wait()
                await self._stop_all()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if self.zookeeper is not None:
                    with contextlib.suppress(Exception):
                        await self.zookeeper.close()
                if self.store is not None:
                    with contextlib.suppress(Exception):
                        await trio.to_thread.run_sync(self._mirror_topics)
                    self.store.close()
                for fd in self._lock_fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                if self.peer_dir is not None:
                    shutil.rmtree(self.peer_dir, ignore_errors=True)

    def shutdown(self) -> None:
        self._stopping = True
        self._stop_requested.set()

    async def _all_registered(self) -> bool:
        if self.zookeeper is not None:
            # Started, and registered since (`_follow_registration`): each waited for an
            # earlier registration of its id (a killed host's, its session not yet ended)
            # to go before it started.
            return all(node in self._registered for node in self.nodes)
        assert self.store is not None
        image = await trio.to_thread.run_sync(self.store.read_image)
        # Every process registered, and every one has applied the image that says so:
        # each then names the others as leaders and coordinators (one that had not yet
        # would answer COORDINATOR_NOT_AVAILABLE for a moment).
        return all(
            image.is_alive(node) and image.brokers[node].applied_version >= image.version
            for node in self.nodes
        )

    async def _wait_ready(self) -> None:
        with trio.move_on_after(READY_TIMEOUT_S):
            while not self._stop_requested.is_set():
                if await self._all_registered():
                    for index in range(self.count):
                        self._ever_ready[index] = True
                    return
                await trio.sleep(0.05)
            return
        raise StartupError(f"the broker processes did not all start within {READY_TIMEOUT_S}s")

    async def _keep_running(self, index: int) -> None:
        node = self.nodes[index]
        command = [*self._command, "--process-index", str(index)]
        if self.zookeeper is not None and self.peer_dir is not None:
            command += ["--metrics-socket", str(metrics_socket(self.peer_dir, node))]
        overrides = process_overrides(self.config, index)
        for key, value in overrides.items():
            command += ["--override", f"{key}={value}"]
        log.info(
            "broker process %d: %s",
            index,
            ", ".join(f"{key}={value}" for key, value in overrides.items()),
        )
        delay: float | None = None
        while True:
            if self.zookeeper is not None:
                # Its earlier run's (or a killed host's) registration must be gone first.
                await self.zookeeper.wait_unregistered(node)
                if self._stop_requested.is_set():
                    return
            started = trio.current_time()
            # The process's stdin: it stops when this end closes, i.e. when we are gone.
            stdin, lifeline = os.pipe()
            try:
                async with trio.open_nursery() as nursery:
                    # Cancelled (the supervisor failed): SIGTERM, then SIGKILL after 5 s.
                    process: trio.Process = await nursery.start(
                        functools.partial(trio.run_process, command, check=False, stdin=stdin)
                    )
                    os.close(stdin)
                    stdin = -1
                    self.processes[index] = process
                    if self.zookeeper is not None:
                        nursery.start_soon(self._follow_registration, node, process)
            finally:
                for fd in (stdin, lifeline):
                    if fd >= 0:
                        os.close(fd)
            self.processes[index] = None
            self._registered.pop(node, None)
            code = process.returncode
            if self.store is not None:  # ZooKeeper ends the process's session itself
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self.store.set_alive, node, False)
            if self._stopping:
                return
            if not self._ever_ready[index] and not self.ready.is_set():
                if code == CONFIG_ERROR_EXIT_CODE:
                    raise ProcessConfigError(f"broker process {index}: configuration error")
                raise StartupError(
                    f"broker process {index} (node {node}) failed to start (exit code {code}); "
                    "see its log above"
                )
            # A process that keeps dying soon after its start is restarted less and less often.
            delay = restart_delay(delay, trio.current_time() - started < STABLE_AFTER_S)
            log.warning(
                "broker process %d (node %d) exited with %s; restarting it in %.1f s%s",
                index,
                node,
                code,
                delay,
                "" if self.zookeeper is None else " once ZooKeeper has ended its session",
            )
            with trio.move_on_at(trio.current_time() + delay):
                await self._stop_requested.wait()
            if self._stop_requested.is_set():
                return

    async def _follow_registration(self, node: int, process: trio.Process) -> None:
        """Until the process started for `node` has registered (or exited): then its
        listeners are where the console may connect, and it counts as ready."""
        assert self.zookeeper is not None
        while process.returncode is None:
            registration = await self.zookeeper.registration(node)
            if registration is not None:
                self._registered[node] = {
                    e.listener_name: f"{connect_host(e.host)}:{e.port}"
                    for e in registration.endpoints
                }
                return
            await trio.sleep(REGISTRATION_POLL_S)

    async def _stop_all(self) -> None:
        timeout_s = self.config.server.shutdown_timeout_ms / 1000 + EXIT_GRACE_S
        for process in self.processes:
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        with trio.move_on_after(timeout_s):
            async with trio.open_nursery() as nursery:
                for process in self.processes:
                    if process is not None:
                        nursery.start_soon(process.wait)
        for process in self.processes:
            if process is not None and process.returncode is None:
                log.warning("broker process %d did not stop in time; killing it", process.pid)
                process.kill()

    async def _mirror_loop(self) -> None:
        assert self.store is not None
        seen = -1
        while True:
            version = await trio.to_thread.run_sync(self.store.version)
            if version != seen:
                await trio.to_thread.run_sync(self._mirror_topics)
                seen = version
            await trio.sleep(self.config.cluster.metadata_poll_interval_ms / 1000)


async def run_cluster(
    config: BrokerConfig, config_path: str | None, overrides: Sequence[str], log_level: str
) -> None:
    """`broker serve` for a cluster: until SIGTERM/SIGINT, then a graceful stop."""
    supervisor = Supervisor(config, config_path, overrides, log_level)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                async for signum in signals:
                    log.info("received %s; stopping the cluster", signal.Signals(signum).name)
                    supervisor.shutdown()
                    return

            nursery.start_soon(stop_on_signal)
            await supervisor.run()
            nursery.cancel_scope.cancel()
