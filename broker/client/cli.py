"""`broker client ...`: a kcat-like, scriptable test client on our codec and Trio.

Each command group lives in its own module (`cmd_*.py`) and registers its
parser here; every command shares `--bootstrap-server`, `--json` and
`--verbose`. Expected failures (cannot connect, a Kafka error code, bad
input) print one line on stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import trio

from broker.client import cmd_admin, cmd_consume, cmd_produce, cmd_raw
from broker.client.session import DEFAULT_BOOTSTRAP, ClientError, ClientSession

EXAMPLES = """examples:
  broker client api-versions
  broker client topics create orders --partitions 3
  printf 'k:v\\n' | broker client produce orders -K :
  broker client consume orders --from-beginning -e -f '%k=%s\\n'
  broker client raw 18 3 '{}'

every command also runs as `python -m broker.client ...`; see
`broker client COMMAND --help` for each command's options and examples.
"""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-b",
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker to talk to (default {DEFAULT_BOOTSTRAP})",
    )
    common.add_argument("--json", action="store_true", help="print JSON")
    common.add_argument("-v", "--verbose", action="store_true", help="say more on stderr")
    parser = argparse.ArgumentParser(
        prog="broker client",
        description="A Kafka test client (kcat-like) on this project's codec.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cmd_admin.add_parsers(commands, common)
    cmd_produce.add_parser(commands, common)
    cmd_consume.add_parser(commands, common)
    cmd_raw.add_parser(commands, common)
    return parser


async def run(args: argparse.Namespace) -> int:
    session = await ClientSession.open(
        args.bootstrap_server, negotiate=getattr(args, "negotiate", True)
    )
    async with session:
        code: int = await args.run(session, args)
        return code


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return trio.run(run, args)
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as kcat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
