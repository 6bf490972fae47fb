"""The log cleaner's state of a compacted topic's partitions, for `topics describe`.

The broker answers it to a DescribeConfigs that names the key `cleaner.state` (see
broker/handlers/describe_configs.py); other topics and brokers without it answer nothing.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from broker.client.session import ClientSession
from broker.config.types import ResourceType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeConfigsRequest
from broker.protocol.messages.describe_configs_request import DescribeConfigsResource

CLEANER_STATE_KEY = "cleaner.state"


async def fetch_cleaner_state(session: ClientSession, topic: str) -> dict[int, dict[str, Any]]:
    """partition -> its state (dirty_ratio, last_cleaned_ms, ...); empty when the topic
    is not compacted."""
    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=ResourceType.TOPIC,
                resource_name=topic,
                configuration_keys=(CLEANER_STATE_KEY,),
            ),
        )
    )
    response = await session.call(request, minimum=1)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            continue
        for entry in result.configs:
            if entry.name == CLEANER_STATE_KEY and entry.value:
                return {int(p): state for p, state in json.loads(entry.value).items()}
    return {}


def describe_line(state: dict[str, Any]) -> str:
    """`Cleaner: dirty ratio 0.42, last cleaned 2026-01-01T10:00:00Z (first dirty 120)`."""
    last = int(state.get("last_cleaned_ms", -1))
    when = (
        datetime.datetime.fromtimestamp(last / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if last >= 0
        else "never"
    )
    line = (
        f"Cleaner: dirty ratio {float(state.get('dirty_ratio', 0)):.2f}, last cleaned {when} "
        f"(first dirty offset {state.get('first_dirty_offset')})"
    )
    return line + (
        ", UNCLEANABLE (corrupt segment, see the broker log)" if state.get("uncleanable") else ""
    )
