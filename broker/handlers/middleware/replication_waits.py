"""Requests that may wait for an internal partition's replication are answered from the
purgatory (`deferred_answers.py`), never from a request-handler task.

The coordinators' writes (OffsetCommit, TxnOffsetCommit, a consumer group's heartbeat,
the transaction coordinator's state changes, the markers a leader writes with acks=all)
are answered once every ISR member holds them, where `__consumer_offsets` and
`__transaction_state` are replicated (docs/replication.md). The followers' Fetch
requests that bring that about come through the same request queue: with every
request-handler task (`num.io.threads`) awaiting an acknowledgement, those Fetches queue
behind them until the ISR shrinks (`replica.lag.time.max.ms`). Measured with
`num.io.threads=2` and one transactional producer: 3.9 s per commit. Kafka appends such
records through the replica manager's DelayedProduce and frees its handler thread; here
a handler opts in with `waits_on_replication = True` and its whole answer is deferred:
the handler task is free at once, and the connection's limiter still keeps one request
in flight, so answers leave in order. (OffsetCommit and Produce with acks=all defer
their own answers, bound to the append they wait for.)
"""

from __future__ import annotations

from broker.handlers.api_handler import ApiHandler, Deferred, Outcome
from broker.handlers.middleware import Next, Stage
from broker.net.request import Request


def waits_on_replication(handler: ApiHandler) -> bool:
    return getattr(handler, "waits_on_replication", False) is True


class ReplicationWaits:
    stage = Stage.REPLICATION_WAITS

    def applies_to(self, handler: ApiHandler) -> bool:
        return waits_on_replication(handler)

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        async def answer() -> Outcome:
            outcome = await call_next(request)
            while isinstance(outcome, Deferred):  # already deferred: wait for it here
                outcome = await outcome.wait()
            return outcome

        return Deferred(answer)
