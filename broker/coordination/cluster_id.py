"""`/cluster/id`: one cluster id for every host (Kafka 2.x's KafkaServer.getOrGenerateClusterId).

The first broker to start creates it, `{"version":"1","id":"<22 chars>"}`, with the id
its `meta.properties` already holds (or `cluster.id`, or a new one); every broker then
reports that id in Metadata and DescribeCluster. A `meta.properties` naming another
cluster means the broker is pointed at the wrong ZooKeeper (or chroot): start-up
stops, as Kafka's InconsistentClusterIdException stops it, rather than mix the logs
of two clusters.
"""

from __future__ import annotations

import json

from broker.coordination.broker_registration import MalformedZnode

CLUSTER_ID_PATH = "/cluster/id"
CLUSTER_ID_VERSION = "1"  # a string in Kafka's ClusterIdZNode


class InconsistentClusterId(Exception):
    """`meta.properties` and `/cluster/id` disagree."""


def encode_cluster_id(cluster_id: str) -> bytes:
    return json.dumps({"version": CLUSTER_ID_VERSION, "id": cluster_id}).encode()


def decode_cluster_id(data: bytes) -> str:
    try:
        cluster_id = json.loads(data)["id"]
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedZnode(f"{CLUSTER_ID_PATH}: not Kafka's cluster id") from exc
    if not isinstance(cluster_id, str) or not cluster_id:
        raise MalformedZnode(f"{CLUSTER_ID_PATH}: not Kafka's cluster id")
    return cluster_id


def check_stored_cluster_id(stored: str | None, cluster_id: str) -> None:
    """Kafka's message, so an operator's search finds its documentation."""
    if stored is not None and stored != cluster_id:
        raise InconsistentClusterId(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored} in"
            " meta.properties. The broker is trying to join the wrong cluster."
            " Configured zookeeper.connect may be wrong."
        )
