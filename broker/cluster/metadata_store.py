"""The shared cluster metadata store: the interface and its SQLite engine.

Every process reads the store; admin operations write it in one transaction
each, so any process can answer CreateTopics & co. and the store serialises
concurrent writers (SQLite's write lock plays the controller's part; a
networked store can replace this one behind `MetadataStore`).

Schema (`cluster-metadata.sqlite` in the first log dir, WAL mode):

- `cluster(key, value)`: `cluster.id`, `metadata.version` (bumped by every
  change processes must apply), `next.producer.id`, `process.count`;
- `brokers(node_id, endpoints, alive, applied_version)`: endpoints as JSON
  `{listener: [host, port]}`; `applied_version` is the last metadata version
  the process has applied (admin calls wait for it, so a created topic is
  ready on its leaders before CreateTopics answers);
- `topics(name, topic_id, configs)` and `partitions(topic, partition, leader)`;
- `broker_load(node_id, bytes_in_per_sec)`: each process's recent load, which places new
  leaders (broker/cluster/placement_by_load.py); reports do not bump the version.

Processes learn of changes by reading `metadata.version` (one indexed SELECT)
on a Trio deadline every `cluster.metadata.poll.interval.ms`; only a changed
version makes them read the rest.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from broker.cluster.cluster_image import BrokerImage, ClusterImage, TopicImage
from broker.cluster.placement_by_load import NodeLoad, place_leaders
from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode

STORE_FILE = "cluster-metadata.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cluster (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS brokers (
    node_id INTEGER PRIMARY KEY,
    endpoints TEXT NOT NULL,
    alive INTEGER NOT NULL,
    applied_version INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    topic_id TEXT NOT NULL UNIQUE,
    configs TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    leader INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS broker_load (
    node_id INTEGER PRIMARY KEY,
    bytes_in_per_sec REAL NOT NULL
);
"""


class MetadataStore(Protocol):
    """What the processes and the supervisor need; every method may block (worker thread)."""

    def version(self) -> int: ...
    def read_image(self) -> ClusterImage: ...
    def cluster_id(self, proposed: str) -> str: ...
    def create_topic(
        self, name: str, topic_id: uuid.UUID, num_partitions: int, configs: Mapping[str, str]
    ) -> int: ...
    def delete_topic(self, name: str) -> int: ...
    def add_partitions(self, name: str, total: int) -> int: ...
    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> int: ...
    def register_broker(self, node_id: int, endpoints: Mapping[str, tuple[str, int]]) -> int: ...
    def set_alive(self, node_id: int, alive: bool) -> None: ...
    def report_applied(self, node_id: int, version: int) -> None: ...
    def report_load(self, node_id: int, bytes_in_per_s: float) -> None: ...
    def allocate_producer_ids(self, block_size: int) -> int: ...
    def close(self) -> None: ...


class SqliteMetadataStore:
    """`MetadataStore` on SQLite in WAL mode: readers never block the writer, and a
    commit is durable (synchronous=FULL) before the call returns."""

    def __init__(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.path = log_dir / STORE_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ reads

    def version(self) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM cluster WHERE key = 'metadata.version'"
            ).fetchone()
        return int(row[0]) if row else 0

    def read_image(self) -> ClusterImage:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                row = self._db.execute(
                    "SELECT value FROM cluster WHERE key = 'metadata.version'"
                ).fetchone()
                brokers = self._db.execute(
                    "SELECT node_id, endpoints, alive, applied_version FROM brokers"
                ).fetchall()
                topics = self._db.execute("SELECT name, topic_id, configs FROM topics").fetchall()
                partitions = self._db.execute(
                    "SELECT topic, partition, leader FROM partitions ORDER BY topic, partition"
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        leaders: dict[str, list[int]] = {}
        for topic, _, leader in partitions:
            leaders.setdefault(topic, []).append(int(leader))
        return ClusterImage(
            version=int(row[0]) if row else 0,
            brokers={
                int(node): BrokerImage(
                    int(node),
                    {k: (str(v[0]), int(v[1])) for k, v in json.loads(endpoints).items()},
                    bool(alive),
                    int(applied),
                )
                for node, endpoints, alive, applied in brokers
            },
            topics={
                name: TopicImage(
                    name, uuid.UUID(topic_id), json.loads(configs), tuple(leaders.get(name, ()))
                )
                for name, topic_id, configs in topics
            },
        )

    def load_reports(self) -> dict[int, float]:
        """Each process's last reported bytes in per second (placement's input)."""
        with self._lock:
            rows = self._db.execute("SELECT node_id, bytes_in_per_sec FROM broker_load").fetchall()
        return {int(node): float(rate) for node, rate in rows}

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM cluster WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # ------------------------------------------------------------ writes

    def _write(self, statements: Iterable[tuple[str, Sequence[object]]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    self._db.execute(sql, params)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def set(self, key: str, value: str) -> None:
        self._write([("INSERT OR REPLACE INTO cluster(key, value) VALUES (?, ?)", (key, value))])

    def cluster_id(self, proposed: str) -> str:
        """The stored cluster id, storing `proposed` when there is none yet."""
        with self._transaction() as db:
            row = db.execute("SELECT value FROM cluster WHERE key = 'cluster.id'").fetchone()
            if row is not None:
                return str(row[0])
            db.execute("INSERT INTO cluster(key, value) VALUES ('cluster.id', ?)", (proposed,))
            return proposed

    def create_topic(
        self, name: str, topic_id: uuid.UUID, num_partitions: int, configs: Mapping[str, str]
    ) -> int:
        """Add a topic with leaders spread over the registered brokers; returns the new
        metadata version. KafkaError TOPIC_ALREADY_EXISTS / INVALID_TOPIC_EXCEPTION."""
        with self._transaction() as db:
            existing = [r[0] for r in db.execute("SELECT name FROM topics")]
            if name in existing:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
            for other in existing:
                if other.replace(".", "_") == name.replace(".", "_"):
                    raise KafkaError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"topic '{name}' collides with existing topic: {other}",
                    )
            leaders = _spread(db, num_partitions)
            db.execute(
                "INSERT INTO topics(name, topic_id, configs) VALUES (?, ?, ?)",
                (name, str(topic_id), json.dumps(dict(configs), sort_keys=True)),
            )
            db.executemany(
                "INSERT INTO partitions(topic, partition, leader) VALUES (?, ?, ?)",
                [(name, p, leader) for p, leader in enumerate(leaders)],
            )
            return _bump(db)

    def delete_topic(self, name: str) -> int:
        with self._transaction() as db:
            if db.execute("DELETE FROM topics WHERE name = ?", (name,)).rowcount == 0:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
            db.execute("DELETE FROM partitions WHERE topic = ?", (name,))
            return _bump(db)

    def add_partitions(self, name: str, total: int) -> int:
        with self._transaction() as db:
            current = db.execute(
                "SELECT COUNT(*) FROM partitions WHERE topic = ?", (name,)
            ).fetchone()[0]
            if total <= current:
                raise KafkaError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"topic currently has {current} partitions, {total} would not be an increase",
                )
            leaders = _spread(db, total - current)
            db.executemany(
                "INSERT INTO partitions(topic, partition, leader) VALUES (?, ?, ?)",
                [(name, current + i, leader) for i, leader in enumerate(leaders)],
            )
            return _bump(db)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> int:
        with self._transaction() as db:
            changed = db.execute(
                "UPDATE topics SET configs = ? WHERE name = ?",
                (json.dumps(dict(configs), sort_keys=True), name),
            ).rowcount
            if changed == 0:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
            return _bump(db)

    def register_broker(self, node_id: int, endpoints: Mapping[str, tuple[str, int]]) -> int:
        """Mark the process serving at its endpoints; returns the new version."""
        document = json.dumps({k: list(v) for k, v in endpoints.items()}, sort_keys=True)
        with self._transaction() as db:
            db.execute(
                "INSERT INTO brokers(node_id, endpoints, alive) VALUES (?, ?, 1) "
                "ON CONFLICT(node_id) DO UPDATE SET endpoints = excluded.endpoints, alive = 1",
                (node_id, document),
            )
            return _bump(db)

    def set_alive(self, node_id: int, alive: bool) -> None:
        with self._transaction() as db:
            if db.execute(
                "UPDATE brokers SET alive = ? WHERE node_id = ? AND alive != ?",
                (int(alive), node_id, int(alive)),
            ).rowcount:
                _bump(db)

    def report_applied(self, node_id: int, version: int) -> None:
        self._write(
            [("UPDATE brokers SET applied_version = ? WHERE node_id = ?", (version, node_id))]
        )

    def report_load(self, node_id: int, bytes_in_per_s: float) -> None:
        self._write(
            [
                (
                    "INSERT OR REPLACE INTO broker_load(node_id, bytes_in_per_sec) VALUES (?, ?)",
                    (node_id, bytes_in_per_s),
                )
            ]
        )

    def allocate_producer_ids(self, block_size: int) -> int:
        """Reserve a block of producer ids for the caller; returns its first id."""
        with self._transaction() as db:
            row = db.execute("SELECT value FROM cluster WHERE key = 'next.producer.id'").fetchone()
            start = int(row[0]) if row else 0
            db.execute(
                "INSERT OR REPLACE INTO cluster(key, value) VALUES ('next.producer.id', ?)",
                (str(start + block_size),),
            )
            return start

    # ------------------------------------------------------------ supervisor

    def prepare_nodes(self, nodes: Sequence[int]) -> None:
        """Before the processes start: forget brokers that are not configured any more,
        add the new ones, mark all down, and hand partitions led by a removed node to the
        configured ones (round-robin). Data does not move: every process reads the
        same log dirs, so a new leader opens the partition where it is."""
        wanted = sorted(nodes)
        with self._transaction() as db:
            placeholders = ",".join("?" * len(wanted))
            db.execute(f"DELETE FROM brokers WHERE node_id NOT IN ({placeholders})", wanted)
            db.execute("UPDATE brokers SET alive = 0")
            db.execute("DELETE FROM broker_load")  # the processes start afresh
            db.executemany(
                "INSERT OR IGNORE INTO brokers(node_id, endpoints, alive) VALUES (?, '{}', 0)",
                [(node,) for node in wanted],
            )
            orphans = db.execute(
                f"SELECT topic, partition FROM partitions WHERE leader NOT IN ({placeholders}) "
                "ORDER BY topic, partition",
                wanted,
            ).fetchall()
            for i, (topic, partition) in enumerate(orphans):
                db.execute(
                    "UPDATE partitions SET leader = ? WHERE topic = ? AND partition = ?",
                    (wanted[i % len(wanted)], topic, partition),
                )
            db.execute(
                "INSERT OR REPLACE INTO cluster(key, value) VALUES ('process.count', ?)",
                (str(len(wanted)),),
            )
            _bump(db)


class _Transaction:
    """`BEGIN IMMEDIATE` ... `COMMIT` (or `ROLLBACK` on an exception) under the lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type is not None else "COMMIT")
        finally:
            self._lock.release()


def _bump(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM cluster WHERE key = 'metadata.version'").fetchone()
    version = (int(row[0]) if row else 0) + 1
    db.execute(
        "INSERT OR REPLACE INTO cluster(key, value) VALUES ('metadata.version', ?)",
        (str(version),),
    )
    return version


def _partition_count(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT COUNT(*) FROM partitions").fetchone()[0])


def _spread(db: sqlite3.Connection, count: int) -> tuple[int, ...]:
    """Leaders for `count` new partitions: the least loaded processes, count breaking ties."""
    rows = db.execute(
        "SELECT b.node_id, COALESCE(l.bytes_in_per_sec, 0), "
        "(SELECT COUNT(*) FROM partitions p WHERE p.leader = b.node_id) "
        "FROM brokers b LEFT JOIN broker_load l ON l.node_id = b.node_id ORDER BY b.node_id"
    ).fetchall()
    if not rows:
        raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no broker is registered")
    nodes = [NodeLoad(int(node), float(load), int(leaders)) for node, load, leaders in rows]
    return place_leaders(nodes, count, _partition_count(db))
