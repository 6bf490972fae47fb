"""The JSON that carries a cleaning pass's plan to the worker process and its outcome
back (broker/log/cleaner_worker.py)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from broker.log.cleaner_pass import CleanedSegment, PassOutcome, PassPlan, SegmentSource
from broker.log.transaction_index import AbortedTxn

EXIT_CORRUPT = 3
"""The worker's exit code for a corrupt segment (its message on stdout)."""


def plan_to_json(plan: PassPlan, bytes_per_second: float) -> bytes:
    data = attrs.asdict(plan)
    data["last_batch_of_producer"] = list(plan.last_batch_of_producer.items())
    data["bytes_per_second"] = bytes_per_second if bytes_per_second < float("inf") else None
    return json.dumps(data).encode()


def plan_from_json(raw: bytes) -> tuple[PassPlan, float]:
    data: dict[str, Any] = json.loads(raw)
    rate = data.pop("bytes_per_second")
    data["segments"] = tuple(
        SegmentSource(**{**s, "aborted": tuple(AbortedTxn(**a) for a in s["aborted"])})
        for s in data["segments"]
    )
    data["aborted"] = tuple(AbortedTxn(**a) for a in data["aborted"])
    data["last_batch_of_producer"] = {int(p): int(o) for p, o in data["last_batch_of_producer"]}
    return PassPlan(**data), float("inf") if rate is None else float(rate)


def outcome_from_json(raw: bytes) -> PassOutcome:
    data: dict[str, Any] = json.loads(raw)
    data["cleaned"] = tuple(CleanedSegment(**c) for c in data["cleaned"])
    return PassOutcome(**data)


def outcome_to_json(outcome: PassOutcome) -> str:
    return json.dumps(attrs.asdict(outcome))
