"""Topics, their metadata on disk, validation, and producer id allocation."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.errors import KafkaError
from broker.log.log_manager import LogDirInUseError, LogManager
from broker.protocol.error_codes import ErrorCode
from tests.log.helpers import append_values, config, crash, open_manager, read_all


async def _error(awaitable: object) -> KafkaError:
    with pytest.raises(KafkaError) as error:
        await awaitable  # type: ignore[misc]
    return error.value


async def test_topic_metadata_survives_a_restart(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    async with open_manager(cfg) as manager:
        a = await manager.create_topic("alpha", 3, configs={"retention.ms": "1234"})
        b = await manager.create_topic("beta.v1", 1)
        await manager.create_partitions("beta.v1", 2)
        await manager.alter_topic_configs("alpha", {"segment.bytes": "100000"})
        await append_values(a.partitions[2], [b"kept"])
        ids = {"alpha": a.topic_id, "beta.v1": b.topic_id}
    async with open_manager(cfg) as manager:
        assert {n: t.topic_id for n, t in manager.topics().items()} == ids
        alpha = manager.topic("alpha")
        assert alpha is not None and manager.topic_by_id(ids["alpha"]) is alpha
        assert len(alpha.partitions) == 3
        assert alpha.configs() == {"retention.ms": "1234", "segment.bytes": "100000"}
        assert alpha.config("retention.ms") == "1234"
        assert alpha.config("retention.bytes") == "-1"
        assert alpha.partitions[0].config.segment_bytes == 100000
        assert len(manager.topics()["beta.v1"].partitions) == 2
        log = manager.partition("alpha", 2)
        assert log is not None and await read_all(log) == [(0, b"kept")]
        assert manager.partition("alpha", 3) is None


async def test_run_is_a_service_that_closes_cleanly_on_cancel(tmp_path: Path) -> None:
    cfg = config(tmp_path, log_retention_check_interval_ms="10")
    manager = LogManager(cfg)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        await manager.create_topic("t", 1)
        await trio.sleep(0.05)  # a few retention ticks
        nursery.cancel_scope.cancel()
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "logs" / "recovery-point-offset-checkpoint").read_text().split("\n")[:3] == [
        "0",
        "1",
        "t 0 0",
    ]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
        (".", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("a" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("sp ace", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("exists", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("exi_sts", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ],
)
async def test_create_topic_refuses_bad_names(tmp_path: Path, name: str, code: ErrorCode) -> None:
    async with open_manager(config(tmp_path)) as manager:
        await manager.create_topic("exi.sts", 1)
        await manager.create_topic("exists", 1)
        assert (await _error(manager.create_topic(name, 1))).error_code == code
        assert len(manager.topics()) == 2


async def test_create_topic_validates_partitions_replication_and_configs(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path, num_partitions="4")) as manager:
        create = manager.create_topic
        assert (await _error(create("t", 0))).error_code == ErrorCode.INVALID_PARTITIONS
        assert (await _error(create("t", 1, 3))).error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        bad_configs = [{"no.such": "1"}, {"retention.ms": "soon"}, {"segment.bytes": "5"}]
        for bad in bad_configs:
            assert (
                await _error(create("t", 1, configs=bad))
            ).error_code == ErrorCode.INVALID_CONFIG
        bogus = await _error(create("t", 1, configs={"cleanup.policy": "compacted"}))
        assert bogus.error_code == ErrorCode.INVALID_CONFIG
        assert "delete" in bogus.message and "compact" in bogus.message
        compacted = await create("c", 1, configs={"cleanup.policy": "compact,delete"})
        assert compacted.partitions[0].config.compact
        checked = await create("t", -1, -1, {"retention.ms": "5"}, validate_only=True)
        assert checked.num_partitions == len(checked.partitions) == 4
        assert [p.partition for p in checked.partitions] == [0, 1, 2, 3]
        assert checked.config("retention.ms") == "5" and manager.topic("t") is None
        assert not (tmp_path / "logs" / "t-0").exists()
        assert len((await create("t", -1)).partitions) == 4
        internal = await create("__consumer_offsets", 2, configs={"cleanup.policy": "compact"})
        assert internal.is_internal and internal.partitions[0].config.delete_enabled is False


async def test_delete_topic_removes_directories_and_wakes_fetchers(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    async with open_manager(cfg) as manager:
        topic = await manager.create_topic("gone", 2)
        await append_values(topic.partitions[0], [b"x"])
        event = topic.partitions[0].data_appended()
        await manager.delete_topic("gone")
        assert event.is_set()
        assert manager.topic("gone") is None and manager.topic_by_id(topic.topic_id) is None
        assert not any(p.name.startswith("gone") for p in (tmp_path / "logs").iterdir())
        error = await _error(manager.delete_topic("gone"))
        assert error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        again = await manager.create_topic("gone", 1)
        assert again.topic_id != topic.topic_id and again.partitions[0].log_end_offset == 0
    async with open_manager(cfg) as manager:
        assert list(manager.topics()) == ["gone"]


async def test_create_partitions_and_alter_configs_validate(tmp_path: Path) -> None:
    async with open_manager(config(tmp_path)) as manager:
        await manager.create_topic("t", 2, configs={"retention.ms": "100", "flush.ms": "7"})
        error = await _error(manager.create_partitions("t", 2))
        assert error.error_code == ErrorCode.INVALID_PARTITIONS
        error = await _error(manager.create_partitions("nope", 3))
        assert error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await manager.create_partitions("t", 5, validate_only=True)
        assert len(manager.topics()["t"].partitions) == 2
        error = await _error(manager.alter_topic_configs("t", {"flush.messages": "0"}))
        assert error.error_code == ErrorCode.INVALID_CONFIG
        await manager.alter_topic_configs("t", {"flush.messages": "1"}, ["flush.ms"])
        assert manager.topics()["t"].configs() == {"retention.ms": "100", "flush.messages": "1"}
        await manager.alter_topic_configs("t", {"segment.ms": "99"}, replace_all=True)
        topic = manager.topics()["t"]
        assert topic.configs() == {"segment.ms": "99"}
        assert topic.config("retention.ms") == manager.topic_config_defaults()["retention.ms"]
        assert topic.partitions[1].config.segment_ms == 99


async def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    seen: list[int] = []
    for clean in (True, False, True):
        async with open_manager(cfg) as manager:
            seen.extend([await manager.allocate_producer_id() for _ in range(7)])
            if not clean:
                crash(manager)
    assert len(set(seen)) == len(seen) == 21
    assert seen[:7] == list(range(7))


async def test_a_second_manager_cannot_open_the_same_log_dir(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    async with open_manager(cfg):
        with pytest.raises(LogDirInUseError, match="in use by another broker process"):
            await LogManager(cfg).open()
