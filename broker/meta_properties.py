"""`meta.properties` in the log directory: the cluster id survives restarts.

Clients cache the cluster id from Metadata; a broker that invented a new one
on every start would look like a different cluster. Kafka keeps it in
`meta.properties` in each log directory, and so do we.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from broker.config import parse_properties

META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def stored_cluster_id(log_dir: Path) -> str | None:
    """The cluster id `meta.properties` holds, None before the first start."""
    path = log_dir / META_PROPERTIES
    if not path.exists():
        return None
    return parse_properties(path.read_text(encoding="utf-8")).get("cluster.id") or None


def load_or_create_cluster_id(log_dir: Path, node_id: int, configured: str | None = None) -> str:
    """Read the cluster id from `log_dir`, creating the file on first start."""
    path = log_dir / META_PROPERTIES
    existing = stored_cluster_id(log_dir)
    if existing:
        return existing
    cluster_id = configured or new_cluster_id()
    log_dir.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(
        f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n", encoding="utf-8"
    )
    os.replace(temporary, path)
    return cluster_id
