"""Issue 13: the pipeline's output topic, one-line CLI errors and its internal commit log."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.pipeline import cli, jobs, sink
from broker.pipeline import options as pipeline_options
from broker.pipeline.kafka_client import KafkaClient
from broker.pipeline.options import SinkOptions
from broker.pipeline.sink import _Producer, ensure_commit_topic
from broker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.integration.broker_harness import (
    BrokerProcess,
    env_without_proxies,
    start_broker_process,
    stop_broker_process,
)
from tests.pipeline.conftest import create_topic

CLI_TIMEOUT_S = 60


def _pipeline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "pipeline", *args],
        env=env_without_proxies(),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-4000:]
    assert "error" in lines[0]
    return lines[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def no_auto_create_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_broker_process(tmp_path / "data", {"auto.create.topics.enable": "false"})
    try:
        yield process
    finally:
        stop_broker_process(process)


def test_run_with_a_missing_job_file_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    line = _one_error_line(_pipeline("run", str(missing)))
    assert str(missing) in line


def test_an_unreachable_bootstrap_server_fails_in_one_line(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{_free_port()}"
    line = _one_error_line(
        _pipeline(
            "archive",
            "--bootstrap-servers",
            bootstrap,
            "--subscribe",
            "events",
            "--output",
            str(tmp_path / "out"),
            "--checkpoint",
            str(tmp_path / "cp"),
            "--available-now",
        )
    )
    assert bootstrap in line


def test_a_missing_source_topic_fails_in_one_line(broker: BrokerProcess, tmp_path: Path) -> None:
    line = _one_error_line(
        _pipeline(
            "archive",
            "--bootstrap-servers",
            broker.bootstrap,
            "--subscribe",
            "no-such-topic",
            "--output",
            str(tmp_path / "out"),
            "--checkpoint",
            str(tmp_path / "cp"),
            "--available-now",
        )
    )
    assert "no-such-topic" in line


def test_aggregate_names_the_missing_output_topic_when_auto_creation_is_off(
    no_auto_create_broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(no_auto_create_broker, "events")
    line = _one_error_line(
        _pipeline(
            "aggregate",
            "--bootstrap-servers",
            no_auto_create_broker.bootstrap,
            "--subscribe",
            "events",
            "--output-topic",
            "event-counts",
            "--checkpoint",
            str(tmp_path / "cp"),
            "--available-now",
        )
    )
    assert "event-counts" in line and "auto-create" in line


def test_the_sink_creates_its_output_topic_when_the_broker_auto_creates(
    broker: BrokerProcess,
) -> None:
    options = SinkOptions.parse({"kafka.bootstrap.servers": broker.bootstrap})
    with KafkaClient.connect(broker.bootstrap) as client:
        assert "sink-made-topic" not in client.partitions_for(["sink-made-topic"])
        assert _Producer(client, options).partitions("sink-made-topic") >= 1
        assert "sink-made-topic" in client.partitions_for(["sink-made-topic"])


def test_the_sink_names_its_missing_output_topic_when_auto_creation_is_off(
    no_auto_create_broker: BrokerProcess,
) -> None:
    bootstrap = no_auto_create_broker.bootstrap
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap})
    with (
        KafkaClient.connect(bootstrap) as client,
        pytest.raises(Exception, match=r"event-counts does not exist .*auto-create"),
    ):
        _Producer(client, options).partitions("event-counts")


def test_the_commit_log_is_an_internal_topic(broker: BrokerProcess) -> None:
    commit_topic = pipeline_options.DEFAULT_COMMIT_TOPIC
    assert commit_topic.startswith("__")
    with KafkaClient.connect(broker.bootstrap) as client:
        ensure_commit_topic(client, commit_topic)
        response = client._connection.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name=commit_topic),),
                allow_auto_topic_creation=False,
            ),
            client._version(MetadataRequest.API_KEY),
        )
        (topic,) = response.topics
        assert topic.error_code == 0 and topic.is_internal


def test_markers_under_the_old_commit_topic_name_are_still_read(broker: BrokerProcess) -> None:
    legacy = "_trio_kafka_sink_commits"
    assert legacy != pipeline_options.DEFAULT_COMMIT_TOPIC
    with KafkaClient.connect(broker.bootstrap) as client:
        ensure_commit_topic(client, legacy)
        assert sink.commit_topics_to_read(client, pipeline_options.DEFAULT_COMMIT_TOPIC) == [
            pipeline_options.DEFAULT_COMMIT_TOPIC,
            legacy,
        ]


def _archive_args(bootstrap: str, topic: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "broker", "pipeline", "archive", "--bootstrap-servers", bootstrap,
        "--subscribe", topic, "--output", str(tmp_path / "out"),
        "--checkpoint", str(tmp_path / "cp"), *extra,
    ]  # fmt: skip


def test_a_broker_dying_mid_stream_fails_in_one_line_naming_the_cause(tmp_path: Path) -> None:
    broker = start_broker_process(tmp_path / "data")
    temp = tmp_path / "tmp"
    temp.mkdir()
    try:
        create_topic(broker, "events")
        job = subprocess.Popen(
            _archive_args(broker.bootstrap, "events", tmp_path, "--trigger-interval", "1 second"),
            env=env_without_proxies() | {"TMPDIR": str(temp)},
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + CLI_TIMEOUT_S * 2
        while not (tmp_path / "cp" / "commits" / "0").exists():
            assert job.poll() is None and time.monotonic() < deadline, "no first micro-batch"
            time.sleep(0.5)
    finally:
        stop_broker_process(broker)
    try:
        _, stderr = job.communicate(timeout=CLI_TIMEOUT_S * 2)
    finally:
        job.kill()
    line = _one_error_line(subprocess.CompletedProcess(job.args, job.returncode, "", stderr))
    assert "STREAM_FAILED" not in line and "Traceback" not in line
    assert broker.bootstrap in line and "refused" in line.lower(), line
    (log_file,) = temp.glob("broker-pipeline-*.log")
    assert str(log_file) in line


def test_wait_for_topics_starts_once_the_topic_exists(
    broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    args = cli._parser().parse_args(
        _archive_args(broker.bootstrap, topic_name, tmp_path, "--wait-for-topics")[4:]
    )
    without_waiting = argparse.Namespace(**{**vars(args), "wait_for_topics": False})
    with pytest.raises(cli.PipelineError, match=f"topic {topic_name} does not exist"):
        cli._preflight(without_waiting)
    waiter = threading.Thread(target=cli._preflight, args=(args,))
    waiter.start()
    time.sleep(cli.WAIT_RETRY_S)
    assert waiter.is_alive()
    create_topic(broker, topic_name)
    waiter.join(timeout=CLI_TIMEOUT_S)
    assert not waiter.is_alive()


def test_the_aggregate_shuffles_over_the_cores_unless_the_session_chose() -> None:
    assert jobs.shuffle_partitions(jobs.SPARK_DEFAULT_SHUFFLE_PARTITIONS, 4) == "4"
    assert jobs.shuffle_partitions(jobs.SPARK_DEFAULT_SHUFFLE_PARTITIONS, 0) == "1"
    assert jobs.shuffle_partitions("7", 4) == "7"


def test_a_failed_querys_line_is_the_python_cause_not_sparks_wrapper() -> None:
    prefix = "[STREAM_FAILED] Query [id = 1f, runId = 2e] terminated with exception: "
    task_failure = (
        f"{prefix}Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most "
        "recent failure: org.apache.spark.api.python.PythonException: Traceback (most recent "
        'call last):\n  File "/repo/broker/pipeline/sink.py", line 300, in write\n'
        "    client.produce(batches)\n"
        "broker.pipeline.kafka_client.KafkaClientError: produce to out-0: NOT_LEADER\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x.scala:1)\n"
    )
    assert cli._one_line(Exception(task_failure)) == (
        "broker.pipeline.kafka_client.KafkaClientError: produce to out-0: NOT_LEADER"
    )
    assert cli._one_line(Exception(f"{prefix}disk full\nat org.apache...")) == "disk full"
