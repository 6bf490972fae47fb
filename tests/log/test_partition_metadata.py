"""`partition.metadata` (Kafka 2.8+): the topic id beside each partition's log, in
Kafka's two-line format, written when a partition is created and adopted by a dir
from before the file; what is not Kafka's format is refused when read."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.partition_metadata import (
    PARTITION_METADATA_FILE,
    MalformedPartitionMetadata,
    adopt_partition_metadata,
    parse_topic_id,
    read_partition_metadata,
    topic_id_string,
    write_partition_metadata,
)
from tests.log.helpers import config, open_manager

# Kafka's Uuid.toString of this id (URL-safe base64, no padding).
TOPIC_ID = uuid.UUID("a1b2c3d4-e5f6-4789-8abc-def012345678")


def test_the_file_is_kafkas_two_lines_and_reads_back(tmp_path: Path) -> None:
    write_partition_metadata(tmp_path, TOPIC_ID)
    text = (tmp_path / PARTITION_METADATA_FILE).read_text()
    assert text == f"version: 0\ntopic_id: {topic_id_string(TOPIC_ID)}\n"
    assert topic_id_string(TOPIC_ID) == "obLD1OX2R4mKvN7wEjRWeA"
    assert read_partition_metadata(tmp_path) == TOPIC_ID
    assert read_partition_metadata(tmp_path / "missing") is None


@given(st.uuids())
def test_topic_ids_round_trip_through_kafkas_string(topic_id: uuid.UUID) -> None:
    assert parse_topic_id(topic_id_string(topic_id)) == topic_id


@pytest.mark.parametrize(
    "text",
    [
        "",
        "version: 0\n",
        "topic_id: obLD1OX2R4mKvN7wEjRWeA\nversion: 0\n",
        "version: x\ntopic_id: obLD1OX2R4mKvN7wEjRWeA\n",
        "version: -1\ntopic_id: obLD1OX2R4mKvN7wEjRWeA\n",
        "version: 0\ntopic_id: short\n",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",  # Kafka's ZERO_UUID
    ],
)
def test_a_file_not_in_kafkas_format_is_malformed(tmp_path: Path, text: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_text(text)
    with pytest.raises(MalformedPartitionMetadata):
        read_partition_metadata(tmp_path)
    adopt_partition_metadata(tmp_path, TOPIC_ID)  # rewritten for the topic opening it
    assert read_partition_metadata(tmp_path) == TOPIC_ID


def test_adopting_keeps_the_id_a_dir_already_names(tmp_path: Path) -> None:
    other = uuid.uuid4()
    write_partition_metadata(tmp_path, other)
    adopt_partition_metadata(tmp_path, TOPIC_ID)
    assert read_partition_metadata(tmp_path) == other


async def test_every_partition_dir_names_its_topic_id_and_old_dirs_are_adopted(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path)
    async with open_manager(cfg) as manager:
        topic = await manager.create_topic("alpha", 2)
        await manager.create_partitions("alpha", 3)
        directories = [p.directory for p in topic.partitions]
    assert [read_partition_metadata(d) for d in directories] == [topic.topic_id] * 3
    (directories[1] / PARTITION_METADATA_FILE).unlink()  # a log from before the file
    async with open_manager(cfg):
        assert read_partition_metadata(directories[1]) == topic.topic_id
