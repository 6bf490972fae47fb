"""Brokers for the interoperability tests: `python -m broker serve`, as a user starts it.

One broker per test module (module scope) saves the start-up time; tests share it
without interfering because every test works on topics of its own
(`unique_topic`). Tests that stop or kill the broker start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.broker_harness import BrokerProcess
from tests.interop.kafka_clients import (
    PROCESS_COUNTS,
    interop_broker_running,
    live_bootstrap,
    process_count_id,
)


@pytest.fixture(scope="module", params=PROCESS_COUNTS, ids=process_count_id)
def interop_broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of one module: a single process, then a cluster of
    three processes (clients route by leadership, groups spread over coordinators)."""
    with interop_broker_running(
        tmp_path_factory.mktemp("interop") / "data", {"process.count": str(request.param)}
    ) as broker:
        yield broker


@pytest.fixture
def bootstrap(interop_broker: BrokerProcess) -> str:
    return live_bootstrap(interop_broker)
