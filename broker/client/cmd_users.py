"""`users scram set | describe | delete`: SCRAM credentials (KIP-554), as kafka-configs.sh.

`set` computes the salt and the salted password here and sends only those
(AlterUserScramCredentials), so the password never reaches the broker.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
from typing import Any

from broker.client.sasl_client import scram_credential
from broker.client.security_config import SCRAM_SHA_256, SCRAM_SHA_512
from broker.client.session import ClientError, ClientSession, check_error, error_name
from broker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from broker.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.messages.describe_user_scram_credentials_request import UserName

Parsers = Any  # argparse's private _SubParsersAction

# org.apache.kafka.clients.admin.ScramMechanism's type ids.
MECHANISM_TYPES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default; also the broker's minimum
SALT_BYTES = 32


def mechanism_name(type_id: int) -> str:
    for name, value in MECHANISM_TYPES.items():
        if value == type_id:
            return name
    return f"UNKNOWN({type_id})"


def _mechanism(text: str) -> str:
    name = text.strip().upper()
    if name not in MECHANISM_TYPES:
        raise ClientError(f"unknown SCRAM mechanism {text!r}: SCRAM-SHA-256 or SCRAM-SHA-512")
    return name


_ENTRY = re.compile(r"\s*(?P<mechanism>[A-Za-z0-9-]+)\s*=\s*\[(?P<body>[^\]]*)\]\s*(?:,|$)")


def parse_add_config(text: str) -> list[tuple[str, int, str]]:
    """kafka-configs.sh's `SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[...]`.

    Gives (mechanism, iterations, password) per entry; iterations default to 4096.
    """
    entries = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _ENTRY.match(text, pos)
        if match is None:
            raise ClientError(
                f"bad --add-config at {text[pos : pos + 30]!r}: expected"
                " SCRAM-SHA-256=[iterations=N,password=SECRET]"
            )
        pos = match.end()
        settings = {}
        for item in match.group("body").split(","):
            key, sep, value = item.partition("=")
            if not sep or key.strip() not in ("iterations", "password"):
                raise ClientError(f"bad --add-config item {item!r}: iterations=N or password=S")
            settings[key.strip()] = value
        if "password" not in settings:
            raise ClientError(f"--add-config {match.group('mechanism')} needs password=...")
        entries.append(
            (
                _mechanism(match.group("mechanism")),
                _iterations(settings.get("iterations", str(DEFAULT_ITERATIONS))),
                settings["password"],
            )
        )
    if not entries:
        raise ClientError("--add-config names no SCRAM mechanism")
    return entries


def _iterations(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ClientError(f"iterations must be an integer, got {text!r}") from None
    if value <= 0:
        raise ClientError(f"iterations must be positive, got {value}")
    return value


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    users = commands.add_parser("users", help="SCRAM credentials of users").add_subparsers(
        dest="kind", required=True
    )
    scram = users.add_parser(
        "scram", help="set, describe or delete SCRAM credentials (as kafka-configs.sh)"
    ).add_subparsers(dest="action", required=True)
    raw = argparse.RawDescriptionHelpFormatter

    p = scram.add_parser(
        "set",
        parents=[common],
        formatter_class=raw,
        help="create or replace a user's SCRAM credential (AlterUserScramCredentials)",
        epilog="examples:\n"
        "  broker client users scram set alice --password alice-secret\n"
        "  broker client users scram set alice --mechanism SCRAM-SHA-512 --iterations 8192"
        " --password-file alice.pw\n"
        "  broker client users scram set alice --add-config"
        " 'SCRAM-SHA-256=[iterations=8192,password=s1],SCRAM-SHA-512=[password=s2]'",
    )
    p.set_defaults(run=users_scram_set)
    p.add_argument("user", metavar="USER")
    p.add_argument(
        "--mechanism",
        default=SCRAM_SHA_256,
        type=_mechanism,
        help="SCRAM-SHA-256 (default) or SCRAM-SHA-512",
    )
    p.add_argument(
        "--iterations",
        type=_iterations,
        default=DEFAULT_ITERATIONS,
        help=f"PBKDF2 iterations (default {DEFAULT_ITERATIONS}; Kafka takes 4096-16384)",
    )
    secret = p.add_mutually_exclusive_group(required=True)
    secret.add_argument("--password", help="the password (visible to ps; see --password-file)")
    secret.add_argument("--password-file", metavar="FILE", help="first line is the password")
    secret.add_argument(
        "--add-config",
        metavar="SPEC",
        help="kafka-configs.sh form: 'SCRAM-SHA-256=[iterations=8192,password=...]',...",
    )

    p = scram.add_parser(
        "describe",
        parents=[common],
        formatter_class=raw,
        help="mechanisms and iterations of users' credentials (all users when none named)",
        epilog="examples:\n  broker client users scram describe\n"
        "  broker client users scram describe alice --json",
    )
    p.set_defaults(run=users_scram_describe)
    p.add_argument("users", nargs="*", metavar="USER")

    p = scram.add_parser(
        "delete",
        parents=[common],
        formatter_class=raw,
        help="delete a user's SCRAM credential for the named mechanisms",
        epilog="example: broker client users scram delete alice --mechanism SCRAM-SHA-256",
    )
    p.set_defaults(run=users_scram_delete)
    p.add_argument("user", metavar="USER")
    p.add_argument(
        "--mechanism",
        action="append",
        required=True,
        type=_mechanism,
        help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable)",
    )


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    try:
        with open(args.password_file, encoding="utf-8") as handle:
            line = handle.readline().rstrip("\r\n")
    except OSError as exc:
        raise ClientError(f"cannot read {args.password_file}: {exc.strerror}") from None
    if not line:
        raise ClientError(f"{args.password_file} holds no password")
    return line


async def _alter(session: ClientSession, body: AlterUserScramCredentialsRequest, what: str) -> None:
    response = await session.call(body)
    for result in response.results:
        check_error(result.error_code, f"{what} for user {result.user!r}", result.error_message)


async def users_scram_set(session: ClientSession, args: argparse.Namespace) -> int:
    if args.add_config is not None:
        entries = parse_add_config(args.add_config)
    else:
        entries = [(args.mechanism, args.iterations, _password(args))]
    upsertions = []
    for mechanism, iterations, password in entries:
        credential = scram_credential(
            mechanism, password, iterations, secrets.token_bytes(SALT_BYTES)
        )
        upsertions.append(
            ScramCredentialUpsertion(
                name=args.user,
                mechanism=MECHANISM_TYPES[mechanism],
                iterations=iterations,
                salt=credential.salt,
                salted_password=credential.salted_password,
            )
        )
    await _alter(
        session, AlterUserScramCredentialsRequest(upsertions=tuple(upsertions)), "set credential"
    )
    done = [{"user": args.user, "mechanism": m, "iterations": i} for m, i, _ in entries]
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        for row in done:
            print(
                f"set {row['mechanism']} credential of user {args.user} ({row['iterations']} iterations)"
            )
    return 0


async def users_scram_delete(session: ClientSession, args: argparse.Namespace) -> int:
    deletions = tuple(
        ScramCredentialDeletion(name=args.user, mechanism=MECHANISM_TYPES[m])
        for m in dict.fromkeys(args.mechanism)
    )
    await _alter(
        session, AlterUserScramCredentialsRequest(deletions=deletions), "delete credential"
    )
    done = [{"user": args.user, "mechanism": m} for m in dict.fromkeys(args.mechanism)]
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        for row in done:
            print(f"deleted {row['mechanism']} credential of user {args.user}")
    return 0


async def users_scram_describe(session: ClientSession, args: argparse.Namespace) -> int:
    users = tuple(UserName(name=u) for u in args.users) if args.users else None
    response = await session.call(DescribeUserScramCredentialsRequest(users=users))
    check_error(response.error_code, "DescribeUserScramCredentials failed", response.error_message)
    described = []
    for result in sorted(response.results, key=lambda r: r.user):
        if result.error_code:
            detail = f" ({result.error_message})" if result.error_message else ""
            raise ClientError(f"user {result.user!r}: {error_name(result.error_code)}{detail}")
        described.append(
            {
                "user": result.user,
                "credentials": [
                    {"mechanism": mechanism_name(c.mechanism), "iterations": c.iterations}
                    for c in result.credential_infos
                ],
            }
        )
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    for entry in described:
        configs = ",".join(
            f"{c['mechanism']}=iterations={c['iterations']}" for c in entry["credentials"]
        )
        print(f"SCRAM credential configs for user-principal '{entry['user']}' are {configs}")
    return 0
