"""`broker client acls add | list | remove` against the broker's authorizer: a SCRAM user
is refused, allowed by an ACL the client adds, and refused again once it is removed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from broker.server import KafkaServer
from tests.client.cli_runner import run_cli
from tests.integration.broker_harness import running_broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class Users:
    """The CLI as the super user (ANONYMOUS on PLAINTEXT) or as alice (SCRAM)."""

    def __init__(self, server: KafkaServer) -> None:
        self.admin = ["-b", f"127.0.0.1:{server.bound_port('PLAINTEXT')}"]
        self.alice = [
            "-b",
            f"127.0.0.1:{server.bound_port('SASL_PLAINTEXT')}",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=SCRAM-SHA-256",
            "-X",
            "sasl.username=alice",
            "-X",
            "sasl.password=alice-secret",
        ]

    async def run(self, *argv: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
        result = await trio.to_thread.run_sync(run_cli, list(argv), stdin)
        return result.code, result.out, result.err

    async def ok(self, *argv: str, stdin: bytes = b"") -> bytes:
        code, out, err = await self.run(*argv, stdin=stdin)
        assert code == 0, err
        return out


@asynccontextmanager
async def authorizing_broker(tmp_path: Path) -> AsyncIterator[Users]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "connection.failed.authentication.delay.ms": "0",
        "metrics.port": "-1",
    }
    async with running_broker(tmp_path / "data", overrides) as server:
        users = Users(server)
        await users.ok("users", "scram", "set", "alice", "--password", "alice-secret", *users.admin)
        await users.ok("topics", "create", "orders", *users.admin)
        await users.ok("produce", "orders", *users.admin, stdin=b"first\nsecond\n")
        yield users


async def test_an_acl_added_by_the_client_lets_a_scram_user_read_until_it_is_removed(
    tmp_path: Path,
) -> None:
    async with authorizing_broker(tmp_path) as users:
        read = ("consume", "orders", "--from-beginning", "-e", *users.alice)
        code, _, err = await users.run(*read)
        assert code == 1 and "TOPIC_AUTHORIZATION_FAILED" in err

        added = await users.ok(
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "orders",
            *users.admin,
        )
        assert added.decode().splitlines()[:2] == [
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders,"
            " patternType=LITERAL)`:",
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        ]
        assert (await users.ok(*read)).splitlines() == [b"first", b"second"]

        binding = {
            "resource_type": "TOPIC",
            "resource_name": "orders",
            "pattern_type": "LITERAL",
            "principal": "User:alice",
            "host": "*",
            "operation": "READ",
            "permission_type": "ALLOW",
        }
        assert json.loads(await users.ok("acls", "list", "--json", *users.admin)) == [binding]
        matching = await users.ok(
            "acls",
            "list",
            "--topic",
            "orders",
            "--resource-pattern-type",
            "match",
            "--json",
            *users.admin,
        )
        assert json.loads(matching) == [binding]
        by_bob = await users.ok("acls", "list", "--principal", "User:bob", "--json", *users.admin)
        assert json.loads(by_bob) == []

        code, _, err = await users.run(
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "All",
            "--cluster",
            *users.alice,
        )
        assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err

        removed = await users.ok(
            "acls",
            "remove",
            "--allow-principal",
            "User:alice",
            "--topic",
            "orders",
            "--json",
            *users.admin,
        )
        assert json.loads(removed) == [binding]
        assert json.loads(await users.ok("acls", "list", "--json", *users.admin)) == []
        code, _, err = await users.run(*read)
        assert code == 1 and "TOPIC_AUTHORIZATION_FAILED" in err


async def test_prefixed_acls_for_a_group_consumer(tmp_path: Path) -> None:
    async with authorizing_broker(tmp_path) as users:
        await users.ok(
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "ord",
            "--group",
            "billing-",
            "--resource-pattern-type",
            "prefixed",
            *users.admin,
        )
        out = await users.ok(
            "consume", "orders", "-g", "billing-1", "--from-beginning", "-e", *users.alice
        )
        assert out.splitlines() == [b"first", b"second"]
        listed = json.loads(
            await users.ok(
                "acls",
                "list",
                "--group",
                "billing-1",
                "--resource-pattern-type",
                "match",
                "--json",
                *users.admin,
            )
        )
        assert [(b["resource_name"], b["pattern_type"]) for b in listed] == [
            ("billing-", "PREFIXED")
        ]
