"""compose.yaml and the Dockerfiles, checked without a Docker engine.

The file must satisfy the Compose specification's schema (vendored, see
compose-spec.NOTICE); every build must point at files that exist; images
must come from pinned bases and package registries only; and the commands
the services run (same entrypoint, same environment mapping) must work when
run natively on 127.0.0.1 with the ports rewritten to free ones.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import trio
import yaml

from broker.client.connection import KafkaConnection
from broker.env_overrides import command_with_overrides, config_key, overrides_from_environment
from broker.protocol.messages import MetadataRequest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
DOCKERFILES = sorted(
    p for p in (ROOT / "docker").glob("Dockerfile.*") if not p.name.endswith(".dockerignore")
)
BIN = Path(sys.executable).parent
_PINNED_BASE = re.compile(
    r"^ARG\s+BASE_IMAGE=python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?(\s|$)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def dockerfile_instructions(path: Path) -> list[str]:
    """Instructions with continuation lines joined and comments dropped."""
    lines = [ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#")]
    return [i.strip() for i in re.sub(r"\\\n", " ", "\n".join(lines)).splitlines() if i.strip()]


def test_compose_file_satisfies_the_compose_specification_schema() -> None:
    schema = json.loads((Path(__file__).parent / "compose-spec.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(COMPOSE)


def test_every_build_context_and_dockerfile_exists() -> None:
    builds = [s["build"] for s in SERVICES.values() if "build" in s]
    assert builds
    for build in builds:
        context = ROOT / build["context"]
        assert context.is_dir()
        assert (context / build["dockerfile"]).is_file()


def test_dockerfiles_pin_their_base_and_install_only_from_package_registries() -> None:
    assert {p.name for p in DOCKERFILES} == {
        "Dockerfile.broker",
        "Dockerfile.pipeline",
        "Dockerfile.zookeeper",  # the cluster profile's (test_compose_cluster.py)
    }
    for path in DOCKERFILES:
        instructions = dockerfile_instructions(path)
        froms = [i for i in instructions if i.upper().startswith("FROM")]
        assert froms == ["FROM ${BASE_IMAGE}"], froms
        base_args = [i for i in instructions if i.startswith("ARG BASE_IMAGE")]
        assert len(base_args) == 1 and _PINNED_BASE.match(base_args[0]), base_args
        for instruction in instructions:
            assert not re.search(r"\b(curl|wget)\b|https?://", instruction), instruction
            assert not instruction.upper().startswith("ADD"), instruction
            for pip in re.findall(r"pip install[^&;]*", instruction):
                assert re.search(r"--require-hashes -r \S+\.lock", pip) or "--no-deps ." in pip, pip
        text = " ".join(instructions)
        if path.name != "Dockerfile.zookeeper":  # Debian's Java package, no Python one
            assert "COPY docker/broker.lock ./requirements.lock" in text
            assert "pip install --require-hashes -r requirements.lock" in text
        users = [i.split()[1] for i in instructions if i.startswith("USER")]
        assert users and users[-1] not in ("root", "0"), "the image must run as non-root"
    pipeline = " ".join(dockerfile_instructions(ROOT / "docker" / "Dockerfile.pipeline"))
    assert "apt-get install" in pipeline and "default-jre-headless" in pipeline


def test_each_image_tag_is_built_by_exactly_one_service() -> None:
    """Services sharing a tag with their own build sections race to build it in parallel."""
    builders: dict[str, list[str]] = {}
    for name, service in SERVICES.items():
        if "build" in service:
            builders.setdefault(service["image"], []).append(name)
    assert all(len(names) == 1 for names in builders.values()), builders
    for name, service in SERVICES.items():
        if "build" not in service:
            assert service["image"] in builders, f"{name} uses an image no service builds"
            assert service.get("pull_policy") == "never", f"{name} must not pull a local tag"


def test_pipeline_image_names_no_cpu_architecture_and_gives_spark_a_writable_work_dir() -> None:
    instructions = dockerfile_instructions(ROOT / "docker" / "Dockerfile.pipeline")
    env = " ".join(i for i in instructions if i.startswith("ENV"))
    assert "JAVA_HOME=/usr/lib/jvm/default-java" in env
    assert not re.search(r"amd64|arm64|aarch64|x86_64", " ".join(instructions))
    work_dir = re.search(r"SPARK_WORKER_DIR=(\S+)", env)
    assert work_dir, "the worker must not fall back to a work dir under the read-only install"
    runs = " ".join(i for i in instructions if i.startswith("RUN"))
    assert "mkdir -p" in runs and work_dir.group(1) in runs
    assert re.search(rf"chown broker:broker [^&]*{re.escape(work_dir.group(1))}", runs)
    users = [i.split()[1] for i in instructions if i.startswith("USER")]
    assert users[-1] == "broker"


def test_broker_image_checks_health_with_api_versions() -> None:
    broker = " ".join(dockerfile_instructions(ROOT / "docker" / "Dockerfile.broker"))
    assert "HEALTHCHECK" in broker and '"api-versions"' in broker
    test = SERVICES["broker"]["healthcheck"]["test"]
    assert test[:4] == ["CMD", "broker", "client", "api-versions"]


def test_pipeline_starts_once_the_broker_is_healthy_and_spark_is_a_profile() -> None:
    assert SERVICES["pipeline"]["depends_on"]["broker"]["condition"] == "service_healthy"
    assert "profiles" not in SERVICES["broker"] and "profiles" not in SERVICES["pipeline"]
    assert SERVICES["spark-master"]["profiles"] == ["spark"]
    assert SERVICES["spark-worker"]["profiles"] == ["spark"]
    assert "spark://spark-master:7077" in SERVICES["spark-worker"]["command"]
    named = set(COMPOSE["volumes"])
    for service in ("broker", "pipeline"):
        sources = {v.split(":")[0] for v in SERVICES[service]["volumes"]}
        assert sources <= named


def test_environment_variables_map_to_kafka_config_keys() -> None:
    assert config_key("KAFKA_CFG_ADVERTISED_LISTENERS") == "advertised.listeners"
    assert config_key("KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP") == (
        "listener.security.protocol.map"
    )
    assert config_key("KAFKA_CFG_SOME__KEY") == "some_key"
    environ = {"KAFKA_CFG_NODE_ID": "3", "PATH": "/bin", "KAFKA_CFG_": "ignored"}
    assert overrides_from_environment(environ) == ["node.id=3"]
    assert command_with_overrides(["broker", "serve"], environ) == [
        "broker",
        "serve",
        "--override",
        "node.id=3",
    ]
    assert command_with_overrides(["broker", "client", "x"], environ) == ["broker", "client", "x"]


def _native_environment(
    rewrites: dict[int, int],
    data_dir: Path,
    service: str = "broker",
    paths: dict[str, str] | None = None,
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_CFG_")}
    env = {k: v for k, v in env.items() if "proxy" not in k.lower()}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    for key, raw in SERVICES[service]["environment"].items():
        value = str(raw).replace("0.0.0.0", "127.0.0.1")
        for container_path, host_path in (paths or {}).items():
            value = value.replace(container_path, host_path)
        for old, new in rewrites.items():
            value = re.sub(rf":{old}\b", f":{new}", value)
            if value == str(old):
                value = str(new)
        env[key] = value
    env["KAFKA_CFG_LOG_DIRS"] = str(data_dir)
    return env


async def _advertised(port: int) -> list[tuple[str, int]]:
    connection = await KafkaConnection.connect("127.0.0.1", port)
    async with connection:
        response = await connection.request(MetadataRequest(topics=()), 9)
    return [(b.host, b.port) for b in response.brokers]


async def test_broker_service_command_serves_the_mapped_listeners(tmp_path: Path) -> None:
    internal, external, metrics = free_port(), free_port(), free_port()
    rewrites = {29092: internal, 9092: external, 9404: metrics}
    env = _native_environment(rewrites, tmp_path / "data")
    command = SERVICES["broker"]["command"]
    log_path = tmp_path / "broker.log"
    with log_path.open("w") as log_file:
        process = subprocess.Popen(  # noqa: ASYNC220 - returns at once; stopped below
            [sys.executable, "-m", "broker.env_overrides", *command],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        serving = f"on http://127.0.0.1:{metrics}/"
        while "started" not in (text := log_path.read_text()) or serving not in text:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            await trio.sleep(0.05)
        healthcheck = [
            re.sub(r":9092$", f":{external}", part)
            for part in SERVICES["broker"]["healthcheck"]["test"][1:]
        ]
        result = await trio.run_process(healthcheck, env=env, capture_stdout=True, check=False)
        assert result.returncode == 0
        assert b"ApiVersions(18)" in result.stdout
        assert await _advertised(external) == [("localhost", external)]
        assert await _advertised(internal) == [("broker", internal)]
        async with httpx.AsyncClient() as http:
            scraped = await http.get(f"http://127.0.0.1:{metrics}/metrics")
        assert scraped.status_code == 200 and "process_start_time_seconds{node=" in scraped.text
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, log_path.read_text()


def test_pipeline_service_command_parses_with_the_pipeline_cli() -> None:
    command = SERVICES["pipeline"]["command"]
    assert command[:3] == ["broker", "pipeline", "archive"]
    result = subprocess.run(
        [sys.executable, "-m", "broker", *command[1:], "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for flag in (arg for arg in command if arg.startswith("--")):
        assert flag in result.stdout


@pytest.mark.parametrize("service", ["spark-master", "spark-worker"])
def test_spark_services_run_a_spark_class_the_image_provides(service: str) -> None:
    command = SERVICES[service]["command"]
    assert command[0] == "spark-class"
    assert (BIN / "spark-class").is_file(), "pyspark from the lock provides spark-class"
    assert command[1].startswith("org.apache.spark.deploy.")


def _pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^ \\]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_image_locks_pin_the_same_versions_as_the_development_lock() -> None:
    """docker/*.lock are subsets of requirements.lock: images run what the tests ran."""
    everything = _pins(ROOT / "requirements.lock")
    broker = _pins(ROOT / "docker" / "broker.lock")
    pipeline = _pins(ROOT / "docker" / "pipeline.lock")
    assert {"trio", "attrs", "cramjam"} <= broker.keys()
    assert "pyspark" not in broker and "pytest" not in broker
    assert {"pyspark", "pyarrow"} <= pipeline.keys()
    for name, version in {**broker, **pipeline}.items():
        assert everything.get(name) == version, name


def _path_without_docker(tmp_path: Path) -> str:
    """A PATH with the shell tools compose-test.sh uses and no docker, dockerd or apt-get."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sed", "mktemp", "rm", "id", "seq", "sleep", "tail", "grep", "dirname"):
        found = subprocess.run(["which", tool], capture_output=True, text=True, check=True)
        (bin_dir / tool).symlink_to(found.stdout.strip())
    return str(bin_dir)


@pytest.mark.parametrize(("required", "exit_code"), [("0", 0), ("1", 1)])
def test_compose_test_says_plainly_when_no_engine_can_be_had(
    tmp_path: Path, required: str, exit_code: int
) -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "docker" / "compose-test.sh")],
        env={"PATH": _path_without_docker(tmp_path), "COMPOSE_TEST_REQUIRED": required},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == exit_code, result.stderr
    assert result.stdout.startswith("compose-test: NOT RUN: no Docker engine"), result.stdout
    assert "passed" not in result.stdout


def test_images_build_on_a_base_given_by_argument_defaulting_to_the_public_one() -> None:
    for service in ("broker", "pipeline"):
        assert SERVICES[service]["build"]["args"] == ["BASE_IMAGE"]
    standin = (ROOT / "docker" / "standin-base.sh").read_text()
    assert "debootstrap" in standin and "PIP_BREAK_SYSTEM_PACKAGES" in standin


def test_compose_file_is_one_docker_compose_1_29_reads_too() -> None:
    """Debian 12's docker-compose 1.29 rejects top-level keys the v2 spec added (`name:`);
    the project name comes from .env, which v1 and v2 both read."""
    top_level = {key for key in COMPOSE if not key.startswith("x-")}
    assert top_level <= {"services", "volumes", "networks", "secrets", "configs"}, top_level
    env = dict(
        line.split("=", 1)
        for line in (ROOT / ".env").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert env == {"COMPOSE_PROJECT_NAME": "trio-kafka"}


def test_the_pipeline_service_waits_for_its_topic_instead_of_restarting() -> None:
    assert "--wait-for-topics" in SERVICES["pipeline"]["command"]


_FAKE_DOCKER = """#!/bin/bash
echo "$(basename "$0") $*" >> "$CALLS"
case "$*" in
  *"inspect -f {{.State.Health.Status}}"*) echo healthy ;;
  *"inspect -f {{.RestartCount}}"*) echo 0 ;;
  *" ps -q "*) echo container-id ;;
  *" logs pipeline"*) echo "broker pipeline archive: waiting: topic events does not exist" ;;
esac
exit 0
"""
_FAKE_BROKER = """#!/bin/bash
case "$*" in *consume*) seq 1 100 ;; *) cat >/dev/null ;; esac
"""


def test_compose_test_proves_the_file_with_both_compose_tools(tmp_path: Path) -> None:
    """Both tools, each a fresh `up` of the default services; images built once."""
    bin_dir = Path(_path_without_docker(tmp_path))
    for tool in ("wc", "basename", "timeout", "cat"):
        found = subprocess.run(["which", tool], capture_output=True, text=True, check=True)
        (bin_dir / tool).symlink_to(found.stdout.strip())
    for name, text in {
        "docker": _FAKE_DOCKER,
        "docker-compose": _FAKE_DOCKER,
        "broker": _FAKE_BROKER,
        "sleep": "#!/bin/bash\n",  # nothing to wait for
    }.items():
        (bin_dir / name).unlink(missing_ok=True)
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    result = subprocess.run(
        ["bash", str(ROOT / "docker" / "compose-test.sh")],
        env={"PATH": str(bin_dir), "CALLS": str(calls), "COMPOSE_TEST_BROKER": "broker"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    passed = [line for line in result.stdout.splitlines() if ": passed" in line]
    assert [line.split(":")[1].strip() for line in passed] == ["docker compose", "docker-compose"]
    log = calls.read_text().splitlines()
    ups = [line for line in log if "up -d --no-build" in line]
    assert ups == [
        "docker compose -p trio-kafka-compose-test up -d --no-build",
        "docker-compose -p trio-kafka-compose-test up -d --no-build",
    ]
    assert sum(" build -q" in line for line in log) == 1
