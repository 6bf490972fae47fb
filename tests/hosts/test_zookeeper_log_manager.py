"""ZooKeeperLogManager applying images of ZooKeeper's topics, without ZooKeeper: the
images are given to `_apply` directly, as the view's watcher gives them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import cast

import trio_util

from broker.coordination.partition_state_znodes import TopicAssignment
from broker.coordination.store import CoordinationStore
from broker.hosts.partition_state_view import HostsImage, PartitionStateView, TopicState
from broker.hosts.zookeeper_log_manager import ZooKeeperLogManager
from broker.log.partition_metadata import read_partition_metadata
from broker.replication.leader_and_isr import LeaderAndIsr
from tests.log.helpers import append_values, config

NODE = 1


def topic(topic_id: uuid.UUID) -> HostsImage:
    """Topic `t`, one partition led here."""
    return {
        "t": TopicState(
            topic_id,
            TopicAssignment("t", {0: (NODE,)}),
            {},
            {0: LeaderAndIsr(NODE, 0, (NODE,))},
        )
    }


def manager(tmp_path: Path) -> ZooKeeperLogManager:
    # Nothing here reads ZooKeeper: the images come from the test.
    store = cast(CoordinationStore, object())
    return ZooKeeperLogManager(
        config(tmp_path),
        NODE,
        store,
        PartitionStateView(store),
        trio_util.AsyncValue({}),
    )


async def test_a_topic_deleted_and_created_again_in_one_image_keeps_the_new_log(
    tmp_path: Path,
) -> None:
    logs = manager(tmp_path)
    await logs.open()
    try:
        old, new = uuid.uuid4(), uuid.uuid4()
        await logs._apply(topic(old))
        old_log = logs.replica_log("t", 0)
        assert old_log is not None
        await append_values(old_log, [b"old"])

        # A full re-read after a session renewal: the deletion and the creation together.
        await logs._apply(topic(new))

        new_log = logs.replica_log("t", 0)
        assert new_log is not None and new_log is not old_log
        assert new_log.directory.is_dir()
        assert read_partition_metadata(new_log.directory) == new
        assert new_log.log_end_offset == 0
        await append_values(new_log, [b"new"])
        assert new_log.log_end_offset == 1
    finally:
        await logs.close()
