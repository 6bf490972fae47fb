"""`broker client ...`: a kcat-like, scriptable test client on our codec and Trio.

Each command group lives in its own module (`cmd_*.py`) and registers its
parser here; every command shares `--bootstrap-server`, `--json` and
`--verbose`. Expected failures (cannot connect, a Kafka error code, bad
input) print one line on stderr and exit 1; usage errors exit 2; Ctrl-C exits
130 and SIGTERM 143, quietly, however many brokers the command was talking to.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

import trio

from broker.client import (
    cmd_acls,
    cmd_admin,
    cmd_configs,
    cmd_consume,
    cmd_group_admin,
    cmd_perf,
    cmd_produce,
    cmd_quotas,
    cmd_raw,
    cmd_records,
    cmd_replicas,
    cmd_transactions,
    cmd_users,
)
from broker.client.routing_session import RoutingSession
from broker.client.security_config import (
    SecurityConfig,
    SecurityConfigError,
    parse_security_properties,
)
from broker.client.session import DEFAULT_BOOTSTRAP, ClientError
from broker.config import ConfigError, parse_properties

EXAMPLES = """examples:
  broker client api-versions
  broker client topics create orders --partitions 3
  printf 'k:v\\n' | broker client produce orders -K :
  broker client consume orders --from-beginning -e -f '%k=%s\\n'
  broker client raw 18 3 '{}'
  broker client -b localhost:9093 -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-256 \\
      -X sasl.username=alice -X sasl.password=alice-secret -X ssl.ca.location=ca.pem metadata
  broker client --command-config client.properties acls list

every command also runs as `python -m broker.client ...`; see
`broker client COMMAND --help` for each command's options and examples.
"""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _add_bootstrap_option(common)
    _add_security_options(common, "")
    common.add_argument("--json", action="store_true", help="print JSON")
    common.add_argument("-v", "--verbose", action="store_true", help="say more on stderr")
    parser = argparse.ArgumentParser(
        prog="broker client",
        description="A Kafka test client (kcat-like) on this project's codec.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_bootstrap_option(parser)  # before the command too, as kcat users type it
    _add_security_options(parser, "global_")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cmd_admin.add_parsers(commands, common)
    cmd_produce.add_parser(commands, common)
    cmd_consume.add_parser(commands, common)
    cmd_raw.add_parser(commands, common)
    cmd_quotas.add_parser(commands, common)
    cmd_acls.add_parsers(commands, common)
    cmd_users.add_parsers(commands, common)
    for admin in (
        cmd_configs,
        cmd_group_admin,
        cmd_records,
        cmd_transactions,
        cmd_perf,
        cmd_replicas,
    ):
        admin.add_parsers(commands, common)
    return parser


# The exit status of a process ended by SIGTERM, as a shell reports it.
EXIT_ON_SIGTERM = 128 + signal.SIGTERM


def _add_bootstrap_option(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's default must not overwrite a value given before it.
    parser.add_argument(
        "-b",
        "--bootstrap-server",
        default=argparse.SUPPRESS,
        metavar="HOST[:PORT][,...]",
        help=f"brokers to try in order (default {DEFAULT_BOOTSTRAP}; port 9092 if none given)",
    )


def _add_security_options(parser: argparse.ArgumentParser, dest_prefix: str) -> None:
    # Separate dests before and after the command: a subcommand's list would replace the
    # main parser's, and both are wanted (kcat's -X may come anywhere).
    parser.add_argument(
        "-X",
        dest=f"{dest_prefix}properties",
        action="append",
        default=argparse.SUPPRESS,
        metavar="KEY=VALUE",
        help="client property, librdkafka/Kafka names: security.protocol, sasl.mechanism,"
        " sasl.username, sasl.password, ssl.ca.location, ... (repeatable; see docs/client.md)",
    )
    parser.add_argument(
        "--command-config",
        dest=f"{dest_prefix}command_config",
        action="append",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="properties file of client properties (as kafka-*.sh --command-config);"
        " -X values override it",
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if not hasattr(args, "bootstrap_server"):
        args.bootstrap_server = DEFAULT_BOOTSTRAP
    args.command_config = [
        *getattr(args, "global_command_config", []),
        *getattr(args, "command_config", []),
    ]
    args.properties = [*getattr(args, "global_properties", []), *getattr(args, "properties", [])]
    return args


def client_properties(config_files: Sequence[str], pairs: Sequence[str]) -> dict[str, str]:
    """The files' properties in order, then the -X pairs; later values win."""
    properties: dict[str, str] = {}
    for path in config_files:
        try:
            with open(path, encoding="utf-8") as handle:
                properties.update(parse_properties(handle.read()))
        except OSError as exc:
            raise ClientError(f"cannot read --command-config {path}: {exc.strerror}") from None
        except ConfigError as exc:
            raise ClientError(f"--command-config {path}: {exc}") from None
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ClientError(f"bad -X {pair!r}: expected KEY=VALUE")
        properties[key.strip()] = value
    return properties


def security_config(args: argparse.Namespace) -> SecurityConfig:
    properties = client_properties(args.command_config, args.properties)
    try:
        return parse_security_properties(properties)
    except SecurityConfigError as exc:
        raise ClientError(str(exc)) from None


async def run(args: argparse.Namespace) -> int:
    """Run the command; SIGTERM cancels it as Ctrl-C does, so cleanup (leaving a group) runs.

    The signal watcher is a system task cancelling a plain scope rather than a nursery
    sibling, so the command's own errors reach main() unwrapped. The watcher owns its
    signal receiver and the command starts once it is open: however the tasks are
    scheduled, a command failing at once never closes the receiver under the watcher.
    """
    if threading.current_thread() is not threading.main_thread():
        return await _run_command(args)  # signal handlers exist only in the main thread
    scope = trio.CancelScope()
    watching = trio.Event()
    trio.lowlevel.spawn_system_task(_cancel_on_signal, scope, watching)
    await watching.wait()
    with scope:
        return await _run_command(args)
    return EXIT_ON_SIGTERM


async def _cancel_on_signal(scope: trio.CancelScope, watching: trio.Event) -> None:
    """Until the run ends (system tasks are cancelled when the main task returns)."""
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        watching.set()
        async for _ in signals:
            scope.cancel()
            return


async def _run_command(args: argparse.Namespace) -> int:
    session = await RoutingSession.open(
        args.bootstrap_server,
        negotiate=getattr(args, "negotiate", True),
        security=args.security,
    )
    async with session:
        code: int = await args.run(session, args)
        return code


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        args.security = security_config(args)
        return trio.run(run, args)
    except BaseExceptionGroup as group:
        # Raised inside concurrent requests (one per partition leader): the same endings.
        leaf = _first_leaf(group)
        if not isinstance(leaf, _USER_ENDINGS):
            raise
        return _ended(leaf)
    except _USER_ENDINGS as exc:
        return _ended(exc)


# How a user ends or fails a command: one line (or none), never a traceback.
_USER_ENDINGS = (ClientError, KeyboardInterrupt, BrokenPipeError)


def _ended(exc: BaseException) -> int:
    """The exit status: 1 with the error's line, 130 for Ctrl-C, 0 for a closed pipe."""
    if isinstance(exc, ClientError):
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if isinstance(exc, KeyboardInterrupt):
        return 130
    # The reader went away (e.g. `| head`): stop quietly, as kcat does.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """Ctrl-C first: it ended the command whatever else its requests raised."""
    interrupted, _ = group.split(KeyboardInterrupt)
    error: BaseException = interrupted if interrupted is not None else group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
