"""Brokers for the interoperability tests: `python -m broker serve`, as a user starts it.

One broker per test module (module scope) saves the start-up time; tests share it
without interfering because every test works on topics of its own
(`unique_topic`). Tests that stop or kill the broker start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.broker_harness import BrokerProcess
from tests.interop.kafka_clients import interop_broker_running, live_bootstrap


@pytest.fixture(scope="module")
def interop_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of one module."""
    with interop_broker_running(tmp_path_factory.mktemp("interop") / "data") as broker:
        yield broker


@pytest.fixture
def bootstrap(interop_broker: BrokerProcess) -> str:
    return live_bootstrap(interop_broker)
