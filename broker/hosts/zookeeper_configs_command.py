"""`broker zookeeper-configs`: entity configs written into ZooKeeper before any broker
starts, as Kafka 2.x's `kafka-configs.sh --zookeeper` writes them.

    broker zookeeper-configs --zookeeper 127.0.0.1:2181/kafka --alter \\
        --entity-type users --entity-name admin \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=admin-secret]'

Hosts whose only listener asks for SASL need their inter-broker user before the first
of them starts: nothing else can create it. The command writes the same znodes and
change notifications as AlterUserScramCredentials, AlterClientQuotas and
IncrementalAlterConfigs (`--entity-type brokers`, broker/hosts/zookeeper_broker_configs.py)
sent to a broker
(`change_entity_config`, shared with broker/hosts/zookeeper_scram_credentials.py), so
running brokers apply the change within about a second. A password is turned into a
salted SCRAM credential here; it is neither stored nor printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

import trio

from broker.config import CONFIG_DEFS, DYNAMIC_BROKER_CONFIGS, ConfigError
from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.config_znodes import (
    CONFIG_CHANGES_PATH,
    CONFIG_PATH,
    DEFAULT_ENTITY,
    QUOTA_KEYS,
    decode_entity_config,
    desanitize,
    encode_scram_credential,
    sanitize,
)
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.store import CoordinationError
from broker.dynamic_broker_config_store import is_sensitive
from broker.hosts.entity_configs import change_entity_config
from broker.security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_BY_NAME,
    MIN_ITERATIONS,
    ScramCredential,
)

ENTITY_TYPES = ("users", "clients", "brokers")
_ENTITY_WORDS = {"users": "user-principal", "clients": "client-id", "brokers": "broker"}
SALT_BYTES = 24


class ConfigsCommandError(ValueError):
    """A request the command refuses, said in one line."""


def split_config_list(text: str) -> dict[str, str]:
    """`k1=v1,k2=[a=1,b=2]` as Kafka's ConfigCommand reads it: commas inside brackets
    belong to the value."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
        if depth < 0:
            raise ConfigsCommandError(f"unbalanced ']' in {text!r}")
    if depth:
        raise ConfigsCommandError(f"unbalanced '[' in {text!r}")
    parts.append(text[start:])
    entries: dict[str, str] = {}
    for part in parts:
        key, equals, value = part.partition("=")
        if not equals or not key.strip():
            raise ConfigsCommandError(f"{part!r} is not KEY=VALUE")
        entries[key.strip()] = value.strip()
    return entries


def scram_credential_value(mechanism: str, value: str, salt: bytes) -> str:
    """`[iterations=8192,password=secret]` (iterations 4096 unless given) as the stored
    credential string."""
    if not (value.startswith("[") and value.endswith("]")):
        raise ConfigsCommandError(f"{mechanism} takes [iterations=N,password=P]")
    fields = split_config_list(value[1:-1])
    unknown = sorted(set(fields) - {"iterations", "password"})
    if unknown or "password" not in fields:
        raise ConfigsCommandError(f"{mechanism} takes [iterations=N,password=P]")
    try:
        iterations = int(fields.get("iterations", str(MIN_ITERATIONS)))
    except ValueError:
        raise ConfigsCommandError(f"{mechanism}: iterations is not a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ConfigsCommandError(
            f"{mechanism}: iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
    credential = ScramCredential.from_password(
        MECHANISM_BY_NAME[mechanism], fields["password"], salt, iterations
    )
    return encode_scram_credential(credential)


def stored_values(entity_type: str, additions: Mapping[str, str]) -> dict[str, str]:
    """The values as the znode keeps them: SCRAM passwords salted and hashed, quotas
    checked to be numbers. ConfigsCommandError for a key the entity type has not."""
    stored: dict[str, str] = {}
    for key, value in additions.items():
        if entity_type == "brokers":
            stored[key] = broker_config_value(key, value)
        elif entity_type == "users" and key in MECHANISM_BY_NAME:
            stored[key] = scram_credential_value(key, value, os.urandom(SALT_BYTES))
        elif key in QUOTA_KEYS:
            try:
                float(value)
            except ValueError:
                raise ConfigsCommandError(f"{key}: {value!r} is not a number") from None
            stored[key] = value
        else:
            raise ConfigsCommandError(f"{key} is not a config of {entity_type}")
    return stored


def broker_config_value(key: str, value: str) -> str:
    """A dynamic broker config as IncrementalAlterConfigs would take it (no password:
    it would be stored in plain text)."""
    if key not in DYNAMIC_BROKER_CONFIGS or is_sensitive(key):
        raise ConfigsCommandError(f"{key} is not a dynamic broker config")
    try:
        CONFIG_DEFS[key].parse(value)
    except ConfigError as exc:
        raise ConfigsCommandError(str(exc)) from None
    return value.strip()


def entity_path(entity_type: str, name: str | None) -> str:
    """Relative to /config, as change notifications name it; None is the default."""
    return f"{entity_type}/{DEFAULT_ENTITY if name is None else sanitize(name)}"


async def alter_entity_config(
    store: KazooCoordinationStore,
    path: str,
    additions: Mapping[str, str],
    deletions: Sequence[str],
) -> None:
    """Write the already-stored-form `additions` and drop `deletions`, then notify."""

    def change(config: dict[str, str]) -> None:
        for key in deletions:
            config.pop(key, None)
        config.update(additions)

    await store.ensure_path(CONFIG_CHANGES_PATH)  # no broker may have made it yet
    await change_entity_config(store, path, change)


async def describe_entity_configs(
    store: KazooCoordinationStore, entity_type: str, name: str | None, *, every: bool
) -> dict[str, dict[str, str]]:
    """Configs by entity name (`<default>` for the default); all of the type if `every`."""
    if every:
        elements = sorted(await store.children(f"{CONFIG_PATH}/{entity_type}"))
    else:
        elements = [entity_path(entity_type, name).split("/", 1)[1]]
    described: dict[str, dict[str, str]] = {}
    for element in elements:
        path = f"{CONFIG_PATH}/{entity_type}/{element}"
        found = await store.get(path)
        config = {} if found is None else decode_entity_config(path, found.data)
        described[desanitize(element)] = config
    return described


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="broker zookeeper-configs",
        description=(
            "Read or change the configs of users, client ids and brokers kept in ZooKeeper, as "
            "kafka-configs.sh --zookeeper does (before any broker starts, or while they run)."
        ),
    )
    parser.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    parser.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    name = parser.add_mutually_exclusive_group()
    name.add_argument("--entity-name")
    name.add_argument("--entity-default", action="store_true")
    parser.add_argument(
        "--add-config",
        default="",
        metavar="K=V,...",
        help="e.g. 'SCRAM-SHA-256=[iterations=8192,password=secret],producer_byte_rate=1024'",
    )
    parser.add_argument("--delete-config", default="", metavar="K,...")
    return parser


async def _run(args: argparse.Namespace) -> list[str]:
    name: str | None = None if args.entity_default else args.entity_name
    word = _ENTITY_WORDS[args.entity_type]
    lines: list[str] = []
    additions: dict[str, str] = {}
    deletions: list[str] = []
    if args.alter:
        if name is None and not args.entity_default:
            raise ConfigsCommandError("--alter needs --entity-name or --entity-default")
        if args.entity_type == "brokers" and name is not None and not name.isdigit():
            raise ConfigsCommandError(f"--entity-name {name!r}: a broker is named by its id")
        if args.add_config.strip():
            additions = stored_values(args.entity_type, split_config_list(args.add_config))
        deletions = [key.strip() for key in args.delete_config.split(",") if key.strip()]
        if not additions and not deletions:
            raise ConfigsCommandError("--alter needs --add-config or --delete-config")
    store = KazooCoordinationStore(
        ZooKeeperSettings(args.zookeeper, session_timeout_ms=10000, connection_timeout_ms=10000)
    )
    await store.connect()
    try:
        if args.alter:
            await alter_entity_config(
                store, entity_path(args.entity_type, name), additions, deletions
            )
            shown = DEFAULT_ENTITY if name is None else name
            lines.append(f"Completed updating config for entity: {word} '{shown}'.")
            return lines
        every = name is None and not args.entity_default
        described = await describe_entity_configs(store, args.entity_type, name, every=every)
        for entity, config in described.items():
            listed = ",".join(f"{key}={value}" for key, value in sorted(config.items()))
            lines.append(f"Configs for {word} '{entity}' are {listed}")
        return lines
    finally:
        await store.close()


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        lines = trio.run(_run, args)
    except (ConfigsCommandError, CoordinationError, MalformedZnode, ConnectionError) as exc:
        print(f"broker zookeeper-configs: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
