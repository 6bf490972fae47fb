"""API keys have names: the generated ApiKey enum, and every handler uses it."""

from __future__ import annotations

from pathlib import Path

from broker.config import load_config
from broker.protocol.api import API_NAMES, SUPPORTED_VERSIONS, ApiKey
from broker.server import KafkaServer


def test_api_key_names_every_request_kafka_defines() -> None:
    assert {int(k) for k in ApiKey} == set(SUPPORTED_VERSIONS) == set(API_NAMES)
    assert (int(ApiKey.PRODUCE), int(ApiKey.API_VERSIONS)) == (0, 18)
    assert ApiKey(36).name == "SASL_AUTHENTICATE"
    assert ApiKey(44).name == "INCREMENTAL_ALTER_CONFIGS"


def test_every_registered_handler_names_its_api_key(tmp_path: Path) -> None:
    config = load_config(
        None,
        [
            "listeners=PLAINTEXT://127.0.0.1:0",
            f"log.dirs={tmp_path / 'data'}",
            "metrics.port=-1",
        ],
    )
    server = KafkaServer(config)
    keys = [server.apis.handler(key).api_key for key in server.apis.supported_versions()]
    assert len(keys) > 40
    assert all(type(key) is ApiKey for key in keys), [k for k in keys if type(k) is not ApiKey]
