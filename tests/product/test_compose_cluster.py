"""compose.yaml's profile `cluster` (issue 20 item 6), checked without a Docker engine:
ZooKeeper and three brokers, each its own host, and the archive pipeline bootstrapping
from all three; `docker compose up` without the profile unchanged.

The ZooKeeper image's command (docker/Dockerfile.zookeeper) runs natively (Debian's
jars, which `make setup` installs for the tests) on a free port, data in the service's
volume's place, until the service's healthcheck passes; each broker's
environment loads as the broker's configuration. docker/compose-test.sh validates the
profile with every compose tool it finds (`--profile cluster config`) and proves the
default stack on a real engine; the cluster's manual check is in docs/replication.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.servers import stop_server
from broker.config.broker_config import load_config
from broker.config.table import CONFIG_DEFS
from broker.env_overrides import overrides_from_environment
from tests.product.test_compose import (
    COMPOSE,
    ROOT,
    SERVICES,
    dockerfile_instructions,
    free_port,
)

BROKERS = ("broker-1", "broker-2", "broker-3")
CLUSTER = {"zookeeper", *BROKERS, "pipeline-cluster"}
START_TIMEOUT_S = 60.0


def _environment(service: str) -> dict[str, str]:
    return {key: str(value) for key, value in SERVICES[service]["environment"].items()}


def _listener_port(listeners: str, name: str) -> tuple[str, int]:
    match = re.search(rf"\b{name}://([^:,]+):(\d+)", listeners)
    assert match, (name, listeners)
    return match.group(1), int(match.group(2))


def test_the_cluster_profile_leaves_docker_compose_up_as_it_was() -> None:
    default = {name for name, service in SERVICES.items() if "profiles" not in service}
    assert default == {"broker", "pipeline"}
    in_cluster = {name for name, s in SERVICES.items() if "cluster" in s.get("profiles", [])}
    assert in_cluster == CLUSTER
    for name in CLUSTER:
        assert SERVICES[name]["profiles"] == ["cluster"], name


def test_each_cluster_broker_is_its_own_host_on_one_zookeeper() -> None:
    seen: dict[str, set[Any]] = {"node": set(), "rack": set(), "volume": set(), "port": set()}
    named_volumes = set(COMPOSE["volumes"])
    for name in BROKERS:
        service, env = SERVICES[name], _environment(name)
        overrides = overrides_from_environment(env)
        keys = {override.split("=")[0] for override in overrides}
        assert keys <= CONFIG_DEFS.keys(), keys - CONFIG_DEFS.keys()
        config = load_config(None, overrides)
        assert config.cluster.zookeeper_connect == "zookeeper:2181/kafka"
        assert config.log.default_replication_factor == 3
        seen["node"].add(config.server.node_id)
        seen["rack"].add(config.server.rack)
        advertised = env["KAFKA_CFG_ADVERTISED_LISTENERS"]
        assert _listener_port(advertised, "INTERNAL") == (name, 29092)
        host, external = _listener_port(advertised, "EXTERNAL")
        assert host == "localhost"
        assert _listener_port(env["KAFKA_CFG_LISTENERS"], "EXTERNAL") == ("0.0.0.0", external)
        assert service["ports"] == [f"{external}:{external}"]
        seen["port"].add(external)
        assert env["KAFKA_CFG_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
        (volume,) = service["volumes"]
        assert volume.split(":")[0] in named_volumes
        seen["volume"].add(volume.split(":")[0])
        assert service["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        assert service["healthcheck"]["test"][:4] == ["CMD", "broker", "client", "api-versions"]
    assert {key: len(values) for key, values in seen.items()} == dict.fromkeys(seen, 3)
    default_ports = {
        p.split(":")[0] for s in ("broker", "broker-secured") for p in SERVICES[s]["ports"]
    }
    assert not {str(p) for p in seen["port"]} & default_ports, "the profiles' ports must not clash"


def test_the_cluster_pipeline_bootstraps_from_every_broker() -> None:
    service = SERVICES["pipeline-cluster"]
    command = service["command"]
    bootstrap = command[command.index("--bootstrap-servers") + 1]
    advertised = [_environment(b)["KAFKA_CFG_ADVERTISED_LISTENERS"] for b in BROKERS]
    internal = [":".join(map(str, _listener_port(a, "INTERNAL"))) for a in advertised]
    assert bootstrap.split(",") == internal
    # Otherwise the default pipeline's command, which test_compose.py parses with the CLI.
    default = SERVICES["pipeline"]["command"]
    assert [a for a in command if a != bootstrap] == [a for a in default if a != "broker:29092"]
    for broker in BROKERS:
        assert service["depends_on"][broker]["condition"] == "service_healthy"
    assert service["volumes"] != SERVICES["pipeline"]["volumes"]


def test_the_zookeeper_service_runs_debians_zookeeper_until_its_healthcheck_passes(
    tmp_path: Path,
) -> None:
    instructions = dockerfile_instructions(ROOT / "docker" / "Dockerfile.zookeeper")
    assert re.search(r"apt-get install [^&]*\bzookeeper\b", " ".join(instructions))
    service = SERVICES["zookeeper"]
    assert service["image"] == "trio-kafka-zookeeper:local"
    assert service["build"]["args"] == ["BASE_IMAGE"]
    (cmd,) = [i for i in instructions if i.startswith("CMD")]
    image_command: list[str] = json.loads(cmd.removeprefix("CMD"))
    (volume,) = service["volumes"]
    data_in_image = volume.split(":")[1]
    assert image_command[-2:] == ["2181", data_in_image]
    port = free_port()
    data_dir = tmp_path / "zookeeper"
    command = [*image_command[:-2], str(port), str(data_dir)]
    health = [arg.replace("2181", str(port)) for arg in service["healthcheck"]["test"][1:]]
    health[0] = "python3"
    log_path = tmp_path / "zookeeper.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while subprocess.run(health, capture_output=True, check=False).returncode != 0:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        assert (data_dir / "version-2").is_dir(), "ZooKeeper keeps its data in its volume"
    finally:
        stop_server(process)
