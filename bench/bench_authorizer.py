"""The authorizer's cost: authorize() calls per second over 10k ACLs, and the broker's
Produce and Metadata rates with the authorizer off and on, side by side.

The micro benchmark compares the indexed authorizer with a linear scan of the
same ACLs (what a naive authorizer does per check), for a literal hit, a prefix
hit and a miss. The broker runs in its own process (see bench_network); with the
authorizer on it holds the same 10k ACLs, of which the benchmark's principal
(User:ANONYMOUS on PLAINTEXT) is granted WRITE and DESCRIBE on the topics used.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from bench.bench_network import load, request_bytes
from bench.servers import our_broker
from broker.protocol import records as rec
from broker.protocol.messages import MetadataRequest, ProduceRequest
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_store import AclStore
from broker.security.authorizer import StandardAuthorizer

ACL_COUNT = 10_000
TOPIC = "bench-events"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def many_acls(count: int, seed: int = 11) -> list[AclBinding]:
    """Literal and prefixed topic ACLs and group ACLs for many users, as a large
    multi-tenant cluster has them; prefixes have varied lengths."""
    rng = random.Random(seed)
    acls = []
    for i in range(count):
        kind = i % 4
        user = f"User:tenant{i % 500}"
        if kind == 3:
            pattern = ResourcePattern(ResourceType.GROUP, f"group-{i}", PatternType.LITERAL)
        elif kind == 2:
            prefix = f"t{i}-" + "x" * rng.randrange(0, 12)
            pattern = ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED)
        else:
            pattern = ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL)
        operation = rng.choice((AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE))
        acls.append(
            AclBinding(pattern, AccessControlEntry(user, "*", operation, AclPermissionType.ALLOW))
        )
    return acls


def linear_scan(acls: list[AclBinding]) -> Callable[[str, str, AclOperation, str], bool]:
    def authorize(principal: str, host: str, operation: AclOperation, name: str) -> bool:
        allowed = False
        for b in acls:
            p, e = b.pattern, b.entry
            if p.resource_type != ResourceType.TOPIC:
                continue
            if p.pattern_type == PatternType.LITERAL:
                if p.name not in (name, "*"):
                    continue
            elif not name.startswith(p.name):
                continue
            if (
                e.principal in (principal, "User:*")
                and e.host in (host, "*")
                and e.operation in (operation, AclOperation.ALL)
            ):
                if e.permission_type == AclPermissionType.DENY:
                    return False
                allowed = True
        return allowed

    return authorize


def calls_per_second(check: Callable[[], bool], duration_s: float) -> float:
    calls = 0
    started = time.perf_counter()
    deadline = started + duration_s
    while time.perf_counter() < deadline:
        for _ in range(100):
            check()
        calls += 100
    return calls / (time.perf_counter() - started)


def micro(duration_s: float) -> list[dict[str, Any]]:
    acls = many_acls(ACL_COUNT)
    authorizer = StandardAuthorizer(acls)
    scan = linear_scan(acls)
    # topic-0 is literal for tenant0; t2- prefixes are tenant2's; nothing matches "nope".
    cases = {
        "literal hit": ("User:tenant0", AclOperation.READ, "topic-0"),
        "prefix hit": ("User:tenant2", AclOperation.DESCRIBE, "t2-" + "x" * 11 + "-events"),
        "miss (default deny)": ("User:tenant7", AclOperation.READ, "nope-topic-name"),
    }
    rows = []
    read = ResourceType.TOPIC
    for name, (principal, operation, topic) in cases.items():
        indexed = calls_per_second(
            partial(authorizer.authorize, principal, "h", operation, read, topic), duration_s
        )
        scanned = calls_per_second(partial(scan, principal, "h", operation, topic), duration_s / 4)
        rows.append(
            {
                "benchmark": f"authorize() with {ACL_COUNT} ACLs: {name}",
                "indexed calls/s": round(indexed),
                "indexed µs/call": round(1e6 / indexed, 2),
                "linear scan calls/s": round(scanned),
                "speed-up": round(indexed / scanned),
            }
        )
    return rows


def produce_template() -> bytes:
    batch = rec.encode_batch(
        [
            rec.Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v" * 100)
            for i in range(10)
        ]
    )
    body = ProduceRequest(
        acks=1,
        timeout_ms=30000,
        topic_data=(
            TopicProduceData(name=TOPIC, partition_data=(PartitionProduceData(0, batch),)),
        ),
    )
    return request_bytes(body, 9)


def broker_rates(duration_s: float, work: Path, authorizer_on: bool) -> dict[str, float]:
    overrides: dict[str, str] = {}
    if authorizer_on:
        grants = [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, TOPIC, PatternType.LITERAL),
                AccessControlEntry("User:ANONYMOUS", "*", op, AclPermissionType.ALLOW),
            )
            for op in (AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE)
        ]
        (work / "data").mkdir(parents=True)
        AclStore(work / "data").save_sync([*many_acls(ACL_COUNT), *grants])
        overrides["authorizer.class.name"] = STANDARD
    metadata = request_bytes(MetadataRequest(topics=(MetadataRequestTopic(name=TOPIC),)), 12)
    every_topic = request_bytes(MetadataRequest(topics=None), 12)
    with our_broker(work, overrides) as bootstrap:
        port = int(bootstrap.rsplit(":", 1)[1])
        trio.run(load, port, metadata, 4, 1, 0.3)  # auto-creates the topic, warms up
        return {
            "produce": trio.run(load, port, produce_template(), 16, 4, duration_s)["req_per_s"],
            "metadata": trio.run(load, port, every_topic, 64, 5, duration_s)["req_per_s"],
        }


def run(duration_s: float = 2.0) -> list[dict[str, Any]]:
    rows = micro(min(duration_s, 1.0))
    # Off and on alternate, twice, and the better run of each counts: on a shared
    # machine a neighbour's burst would otherwise decide the comparison.
    best: dict[bool, dict[str, float]] = {False: {}, True: {}}
    for authorizer_on in (False, True, True, False):
        with tempfile.TemporaryDirectory() as work:
            rates = broker_rates(duration_s, Path(work), authorizer_on)
        for key, rate in rates.items():
            best[authorizer_on][key] = max(best[authorizer_on].get(key, 0.0), rate)
    off, on = best[False], best[True]
    for key, label in (
        ("produce", "Produce v9, 10 records of 100 B, acks=1, 16 conns x 4 pipelined"),
        ("metadata", "Metadata v12 (all topics), 64 conns x 5 pipelined"),
    ):
        rows.append(
            {
                "benchmark": f"broker {label}",
                "authorizer off req/s": round(off[key]),
                f"authorizer on ({ACL_COUNT} ACLs) req/s": round(on[key]),
                "on/off": round(on[key] / off[key], 2),
            }
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
