"""What every subsystem of one broker is given: exactly this, never the broker itself.

`KafkaServer` assembles the broker from explicit collaborators, the way hypercorn's
`TCPServer(app, config, context, stream)` gets what it needs: each subsystem's wiring
function takes this context plus the few collaborators of its own (the log, the group
coordinator, a store), registers its handlers with `apis`, and returns what has a
lifetime (its services) for the server to start in order. No wiring function holds or
changes the server, so the modules import no `KafkaServer` and hide no cycles.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from broker.config import BrokerConfig
from broker.handlers.kafka_apis import KafkaApis
from broker.metrics import MetricsRegistry
from broker.security.authorizer import Authorizer


class Service(Protocol):
    """A subsystem living as long as the broker: the log, the group coordinator, ...

    `run` is started (in registration order) before the network, reports
    readiness through `task_status`, and runs until cancelled; it leaves its
    state durable when cancelled (shielded clean-up in `finally`). Services
    are cancelled only after the network has stopped and in-flight requests
    have been answered.
    """

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None: ...


@attrs.frozen
class BrokerContext:
    config: BrokerConfig
    node_id: int
    cluster_id: str
    log_dirs: tuple[Path, ...]
    metrics: MetricsRegistry
    apis: KafkaApis
    authorizer: Authorizer
    advertised_endpoint: Callable[[str], tuple[str, int]]
    """The host and port clients should use for a listener name."""
