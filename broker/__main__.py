"""`broker` command line.

- `broker serve [server.properties] [--override key=value ...]` runs the broker;
- `broker client ...` is the test client (`broker.client.cli`);
- `broker pipeline ...` runs the Spark jobs (`broker.pipeline.cli`);
- `broker zookeeper-configs ...` writes SCRAM users and quotas of hosts into ZooKeeper
  (`broker.hosts.zookeeper_configs_command`), as `kafka-configs.sh --zookeeper`.

Each subcommand module owns its arguments and is imported only when used, so
serving never pays for importing Spark.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

from broker.cluster.group_shards import reshard_for_single_process
from broker.cluster.member import ClusterMember, stop_when_supervisor_exits
from broker.cluster.process_ports import check_process_ports
from broker.cluster.supervisor import (
    ProcessConfigError,
    StartupError,
    check_process_configs,
    run_cluster,
)
from broker.config import BrokerConfig, ConfigError, load_config
from broker.config_error import CONFIG_ERROR_EXIT_CODE
from broker.coordination.cluster_id import InconsistentClusterId
from broker.hosts.zookeeper_deployment import ZooKeeperDeployment
from broker.server import KafkaServer
from broker.startup_checks import check_startup_config
from broker.wiring.deployment import Deployment

log = logging.getLogger("broker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="broker", description="A Kafka-compatible broker on Trio."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the broker in the foreground",
        description="Run the broker. Config uses Kafka's names and server.properties format.",
        epilog="example: broker serve config/server.properties --override num.io.threads=4",
    )
    serve.add_argument("config", nargs="?", help="a server.properties file")
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config key, after the file (repeatable)",
    )
    serve.add_argument("--log-level", default="INFO", help="root log level (default INFO)")
    # Set by the supervisor for each process of a cluster (broker/cluster/supervisor.py).
    serve.add_argument("--process-index", type=int, default=None, help=argparse.SUPPRESS)
    # Set by a host's supervisor: where the process serves /metrics for it alone.
    serve.add_argument("--metrics-socket", type=Path, default=None, help=argparse.SUPPRESS)
    # Listed for --help only: main() hands these to their own modules before parsing.
    commands.add_parser(
        "client", help="the kcat-like test client (broker client --help)", add_help=False
    )
    commands.add_parser(
        "pipeline",
        help="the Spark Structured Streaming jobs (broker pipeline --help)",
        add_help=False,
    )
    commands.add_parser(
        "zookeeper-configs",
        help="SCRAM users, quotas, broker configs in ZooKeeper, as kafka-configs.sh --zookeeper",
        add_help=False,
    )
    return parser


def configure_logging(level: str, node: str = "") -> None:
    logging.basicConfig(
        level=level.upper(),
        format=f"%(asctime)s %(levelname)s {node}[%(name)s] %(message)s",
        stream=sys.stderr,
    )


def tune_garbage_collector() -> None:
    """Keep the cyclic collector off the request path.

    Every request allocates a few dozen short-lived objects; with the default
    threshold (700) gen-0 collections run every few requests. Objects made at
    start-up (the codec, config, handlers) are frozen out of the collector's
    view, and collections become rarer; reference counting still frees
    almost everything at once.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


async def serve(
    config: BrokerConfig, process_index: int | None = None, metrics_socket: Path | None = None
) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully.

    The composition root: a broker with `zookeeper.connect` is a broker among hosts
    (broker/hosts/), alone or one of its supervisor's processes (`process_index`);
    without it, a process the supervisor started is a member of the one-host cluster
    (broker/cluster/), and a broker without either is alone. `metrics_socket`: where a
    host's process serves /metrics to its supervisor (a member learns its own socket
    from the cluster's metadata store).
    """
    member: ClusterMember | None = None
    deployment: Deployment | None = None
    if config.cluster.zookeeper_connect is not None:
        deployment = ZooKeeperDeployment(config, metrics_socket=metrics_socket)
    elif process_index is not None:
        deployment = member = ClusterMember(config, process_index)
    server = KafkaServer(config, deployment=deployment)
    tune_garbage_collector()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            if process_index is not None:
                nursery.start_soon(stop_when_supervisor_exits, server.shutdown)
            if member is not None:
                await member.announce(server.advertised_endpoints())

            async def stop_on_signal() -> None:
                async for signum in signals:
                    log.info("received %s", signal.Signals(signum).name)
                    server.shutdown()
                    return

            nursery.start_soon(stop_on_signal)
            await server.stopped.wait()
            nursery.cancel_scope.cancel()


SUBCOMMANDS = {
    "client": "broker.client.cli",
    "pipeline": "broker.pipeline.cli",
    "zookeeper-configs": "broker.hosts.zookeeper_configs_command",
}


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in SUBCOMMANDS:
        module = importlib.import_module(SUBCOMMANDS[arguments[0]])
        return int(module.main(arguments[1:]))
    args = _parser().parse_args(arguments)
    index = args.process_index
    configure_logging(args.log_level, "" if index is None else f"(process {index}) ")
    try:
        config = load_config(args.config, args.override)
        count = config.cluster.processes
        if index is None:  # the supervisor plans every process's ports
            check_process_ports(config, count)
            check_process_configs(config, count)
        check_startup_config(config)
    except (ConfigError, OSError) as exc:
        log.error("invalid configuration: %s", exc)
        return CONFIG_ERROR_EXIT_CODE
    if index is None:  # once: the supervisor's processes differ only as it logs
        for key, value in config.effective().items():
            log.info("config %s = %s", key, value)
    failure: BaseException | None = None
    config_error: BaseException | None = None
    try:
        if index is None and count > 1:
            trio.run(run_cluster, config, args.config, args.override, args.log_level)
        else:
            if index is None:
                reshard_for_single_process(Path(config.log_dirs[0]))
            _run_profiled(serve, config, index, args.metrics_socket)
    except* ProcessConfigError as group:  # the process has logged its error
        config_error = _first_leaf(group)
    except* ConfigError as group:  # found by a check the start-up checks do not make
        config_error = _first_leaf(group)
        log.error("invalid configuration: %s", config_error)
    except* (OSError, StartupError, InconsistentClusterId) as group:
        failure = _first_leaf(group)
    if config_error is not None:
        return CONFIG_ERROR_EXIT_CODE
    if failure is not None:
        log.error("fatal error during startup: %s", failure)
        return 1
    return 0


def _run_profiled(serve_fn: Callable[..., Awaitable[object]], *args: object) -> None:
    """`trio.run`, under cProfile when BROKER_PROFILE names a file for its stats: where
    a broker spends its CPU under load (py-spy is not at hand), at a cost only then.
    "{pid}" in the name is the process id, so that each process of a cluster or of
    several hosts keeps its own."""
    path = os.environ.get("BROKER_PROFILE", "").replace("{pid}", str(os.getpid()))
    if not path:
        trio.run(serve_fn, *args)
        return
    profile = cProfile.Profile()
    try:
        profile.runcall(trio.run, serve_fn, *args)
    finally:
        profile.dump_stats(path)


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


if __name__ == "__main__":
    sys.exit(main())
