"""Brokers for the interoperability tests: `python -m broker serve`, as a user starts it.

One broker per test module (module scope) saves the start-up time; tests share it
without interfering because every test works on topics of its own
(`unique_topic`). Tests that stop or kill the broker start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.broker_harness import BrokerProcess, stop_broker_process
from tests.interop.kafka_clients import start_interop_broker


@pytest.fixture(scope="module")
def interop_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of one module."""
    broker = start_interop_broker(tmp_path_factory.mktemp("interop") / "data")
    try:
        yield broker
    finally:
        code = stop_broker_process(broker)
        # A broker that crashed under a test is a failure of that module even when
        # every assertion before it passed.
        assert code == 0, f"broker exited with {code}:\n{broker.log_text()[-4000:]}"


@pytest.fixture
def bootstrap(interop_broker: BrokerProcess) -> str:
    assert interop_broker.process.poll() is None, interop_broker.log_text()[-4000:]
    return interop_broker.bootstrap
