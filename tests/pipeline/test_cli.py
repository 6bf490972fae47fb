"""`broker pipeline archive` as a user runs it: locally and on a standalone cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.dataset as ds
import pyspark

from tests.integration.broker_harness import BrokerProcess, env_without_proxies
from tests.pipeline.conftest import create_topic, produce

SPARK_HOME = Path(pyspark.__file__).parent
JOB_TIMEOUT_S = 180
START_TIMEOUT_S = 60
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


def _env() -> dict[str, str]:
    env = env_without_proxies()
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["PYSPARK_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def _archive_cli(broker: BrokerProcess, topic: str, tmp_path: Path, master: str) -> None:
    args = [
        sys.executable,
        "-m",
        "broker",
        "pipeline",
        "archive",
        "--bootstrap-servers",
        broker.bootstrap,
        "--subscribe",
        topic,
        "--output",
        str(tmp_path / "out"),
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--available-now",
        "--master",
        master,
    ]
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = _env() | {"TMPDIR": str(temp)}
    result = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    # Spark's log file explains failures only: a successful run leaves none behind.
    assert not list(temp.glob("broker-pipeline-*.log"))


def _archived_offsets(tmp_path: Path) -> list[tuple[int, int]]:
    table = ds.dataset(str(tmp_path / "out"), format="parquet", partitioning="hive").to_table()
    return sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))


def test_cli_archive_available_now_archives_every_record(
    broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, 0, [b"a"] * 12)
    produce(broker, topic_name, 1, [b"b"] * 8)
    _archive_cli(broker, topic_name, tmp_path, "local[1]")
    assert _archived_offsets(tmp_path) == [(0, o) for o in range(12)] + [(1, o) for o in range(8)]


@contextmanager
def _standalone_cluster(log_dir: Path) -> Iterator[str]:
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_log = (log_dir / "master.log").open("w")
    worker_log = (log_dir / "worker.log").open("w")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0"],
            env=_env(), stdout=master_log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(master)
        url = _wait_for(log_dir / "master.log", _MASTER_URL, master)
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--cores", "2", "--memory", "2g", "--webui-port", "0",
             "--work-dir", str(log_dir / "work")],
            env=_env(), stdout=worker_log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(worker)
        _wait_for(
            log_dir / "worker.log", re.compile(r"Successfully registered with master"), worker
        )
        yield url
    finally:
        for process in reversed(processes):
            process.kill()
            process.wait(timeout=30)
        master_log.close()
        worker_log.close()


def _wait_for(log: Path, pattern: re.Pattern[str], process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = pattern.search(log.read_text(errors="replace"))
        if match:
            return match.group(1) if pattern.groups else match.group(0)
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{log.name}: no {pattern.pattern!r} within {START_TIMEOUT_S}s")


def test_archive_job_runs_on_a_standalone_master_and_worker(
    broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, 0, [b"x"] * 30)
    produce(broker, topic_name, 1, [b"y"] * 10)
    with _standalone_cluster(tmp_path) as url:
        assert url.startswith("spark://127.0.0.1:")
        _archive_cli(broker, topic_name, tmp_path, url)
    assert _archived_offsets(tmp_path) == [(0, o) for o in range(30)] + [(1, o) for o in range(10)]
    assert os.listdir(tmp_path / "work"), "the job did not run on the worker"
