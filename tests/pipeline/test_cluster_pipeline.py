"""The Spark source and sink against a cluster of three broker processes.

The same tests as against one process (imported from the source and sink suites),
with this module's `broker`: partitions are led by different processes, so every
read and write goes through the pipeline's leader routing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)
from tests.pipeline.test_sink import (  # noqa: F401  (collected here against the cluster)
    test_a_replayed_micro_batch_writes_nothing_twice,
    test_batch_write_sends_topic_key_value_headers_and_partition,
    test_keyed_rows_without_partition_go_where_kafkas_partitioner_puts_them,
)
from tests.pipeline.test_source import (  # noqa: F401  (collected here against the cluster)
    test_archive_writes_every_record_exactly_once_across_restarts,
    test_new_partitions_and_headers_reach_a_running_stream,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("pipeline-cluster") / "data"
    process = start_broker_process(data_dir, {"num.partitions": "1", "process.count": "3"})
    try:
        yield process
    finally:
        assert stop_broker_process(process) == 0


def test_the_cluster_has_three_processes(broker: BrokerProcess) -> None:
    assert len(broker.node_ports()) == 3
