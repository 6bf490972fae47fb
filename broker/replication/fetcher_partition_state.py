"""A follower's fetch state for one partition (Kafka's PartitionFetchState and the
decisions of AbstractFetcherThread), as events in and actions out.

The replica fetcher task polls each partition (`Poll`), sends what the actions
say, feeds the answers back as events and carries out the actions on the local
log. Every answer names the leader epoch of the request it answers: an answer
from before a leadership change is dropped, so a stale response can never
truncate or append to a log that now follows another leader.

Phases: TRUNCATING (find the offset the logs share, before any fetch),
FETCHING, and OUT_OF_RANGE (waiting for the leader's log start and end offsets).
Any phase can be delayed until a time, after a retriable error.
"""

from __future__ import annotations

import enum

import attrs

from broker.protocol.error_codes import ErrorCode
from broker.replication.follower_truncation import offset_truncation_state
from broker.replication.leader_epoch_cache import EpochEndOffset, LeaderEpochCache

UNKNOWN_EPOCH = -1

# A leader learns of its election through its own ZooKeeper watch, often a few
# milliseconds after its followers: NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH
# from it is retried after this, doubling up to replica.fetch.backoff.ms, so that a
# leadership change holds acks=all producers for milliseconds, not a whole back-off.
LEADER_NOT_READY_FIRST_BACKOFF_MS = 25
LEADER_NOT_READY_QUICK_RETRIES = 5  # 25 + 50 + 100 + 200 + 400 ms
LEADER_NOT_READY = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH})


class FetchPhase(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    OUT_OF_RANGE = "out_of_range"


@attrs.frozen
class PartitionFetchState:
    leader_id: int
    current_leader_epoch: int
    fetch_offset: int
    phase: FetchPhase = FetchPhase.TRUNCATING
    delayed_until: float | None = None
    # Answers in a row saying the leader does not know its leadership yet.
    leader_not_ready: int = 0

    @classmethod
    def start_following(
        cls, leader_id: int, leader_epoch: int, log_end_offset: int
    ) -> PartitionFetchState:
        """A new leader (or epoch): always truncate first, the logs may have diverged."""
        return cls(leader_id, leader_epoch, log_end_offset)

    def is_delayed(self, now: float) -> bool:
        return self.delayed_until is not None and now < self.delayed_until

    @property
    def retrying_soon(self) -> bool:
        """Delayed by one of the first, short retries of a leader not ready yet."""
        return 0 < self.leader_not_ready <= LEADER_NOT_READY_QUICK_RETRIES


@attrs.frozen(eq=False)
class LocalLog:
    """What the follower's own log says at the moment of the event."""

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    epoch_cache: LeaderEpochCache


# -- events --
@attrs.frozen
class Poll:
    """The fetcher is building its next requests."""


@attrs.frozen
class EpochEndOffsetAnswered:
    """OffsetsForLeaderEpoch answered for this partition."""

    request_leader_epoch: int
    error: ErrorCode
    answer: EpochEndOffset


@attrs.frozen
class FetchAnswered:
    """Fetch answered; `records_end_offset` is one past the last record returned
    (None when none were), `diverging_epoch` the leader's KIP-595 hint."""

    request_leader_epoch: int
    error: ErrorCode
    high_watermark: int = -1
    records_end_offset: int | None = None
    diverging_epoch: EpochEndOffset | None = None


@attrs.frozen
class LeaderOffsetsAnswered:
    """The leader's earliest and latest offsets (ListOffsets), after OFFSET_OUT_OF_RANGE."""

    request_leader_epoch: int
    log_start_offset: int
    log_end_offset: int


Event = Poll | EpochEndOffsetAnswered | FetchAnswered | LeaderOffsetsAnswered


# -- actions --
@attrs.frozen
class SendOffsetsForLeaderEpoch:
    current_leader_epoch: int
    leader_epoch: int


@attrs.frozen
class SendFetch:
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int


@attrs.frozen
class SendListOffsets:
    current_leader_epoch: int


@attrs.frozen
class Truncate:
    """Truncate the log and its epoch cache to `offset` (never below the high watermark
    by choice of this module, except where the leader's log is shorter)."""

    offset: int


@attrs.frozen
class TruncateFullyAndStartAt:
    """The leader deleted what the follower needs next: start empty at `offset`."""

    offset: int


@attrs.frozen
class AppendAsFollower:
    """Append the records of the answer, keeping their offsets and leader epochs."""

    end_offset: int


@attrs.frozen
class UpdateHighWatermark:
    high_watermark: int


@attrs.frozen
class RemovePartition:
    """Fenced: stop fetching until the controller's state names a newer epoch."""

    reason: ErrorCode


Action = (
    SendOffsetsForLeaderEpoch
    | SendFetch
    | SendListOffsets
    | Truncate
    | TruncateFullyAndStartAt
    | AppendAsFollower
    | UpdateHighWatermark
    | RemovePartition
)


@attrs.frozen
class Transition:
    state: PartitionFetchState | None  # None: removed
    actions: tuple[Action, ...] = ()


@attrs.frozen
class FetcherSettings:
    replica_fetch_backoff_ms: int = 1000


def on_event(
    state: PartitionFetchState,
    event: Event,
    log: LocalLog,
    now: float,
    settings: FetcherSettings = FetcherSettings(),
) -> Transition:
    if isinstance(event, Poll):
        return _poll(state, log, now)
    if event.request_leader_epoch != state.current_leader_epoch:
        return Transition(state)  # an answer to a request of an earlier leadership
    if isinstance(event, EpochEndOffsetAnswered):
        if state.phase is not FetchPhase.TRUNCATING:
            return Transition(state)
        if event.error is not ErrorCode.NONE:
            return _on_error(state, event.error, now, settings)
        return _truncate(attrs.evolve(state, leader_not_ready=0), event.answer, log)
    if isinstance(event, FetchAnswered):
        if state.phase is not FetchPhase.FETCHING:
            return Transition(state)
        return _on_fetch(state, event, log, now, settings)
    if state.phase is not FetchPhase.OUT_OF_RANGE:
        return Transition(state)
    return _on_leader_offsets(state, event, log)


def _poll(state: PartitionFetchState, log: LocalLog, now: float) -> Transition:
    if state.is_delayed(now) or state.phase is FetchPhase.OUT_OF_RANGE:
        return Transition(state)
    ready = attrs.evolve(state, delayed_until=None)
    latest_epoch = log.epoch_cache.latest_epoch
    if state.phase is FetchPhase.TRUNCATING:
        if latest_epoch is None:
            # Without epochs nothing beyond the high watermark is known to be shared.
            offset = min(log.high_watermark, log.log_end_offset)
            fetching = attrs.evolve(ready, fetch_offset=offset, phase=FetchPhase.FETCHING)
            return Transition(fetching, (Truncate(offset), _fetch(fetching, log, UNKNOWN_EPOCH)))
        return Transition(
            ready, (SendOffsetsForLeaderEpoch(state.current_leader_epoch, latest_epoch),)
        )
    epoch = UNKNOWN_EPOCH if latest_epoch is None else latest_epoch
    return Transition(ready, (_fetch(ready, log, epoch),))


def _fetch(state: PartitionFetchState, log: LocalLog, last_fetched_epoch: int) -> SendFetch:
    return SendFetch(
        state.fetch_offset, state.current_leader_epoch, last_fetched_epoch, log.log_start_offset
    )


def _truncate(state: PartitionFetchState, answer: EpochEndOffset, log: LocalLog) -> Transition:
    decision = offset_truncation_state(
        answer, log.epoch_cache, log.log_end_offset, log.high_watermark
    )
    phase = FetchPhase.FETCHING if decision.truncation_completed else FetchPhase.TRUNCATING
    moved = attrs.evolve(state, fetch_offset=decision.offset, phase=phase)
    return Transition(moved, (Truncate(decision.offset),))


def _on_fetch(
    state: PartitionFetchState,
    event: FetchAnswered,
    log: LocalLog,
    now: float,
    settings: FetcherSettings,
) -> Transition:
    if event.error is ErrorCode.OFFSET_OUT_OF_RANGE:
        return Transition(
            attrs.evolve(state, phase=FetchPhase.OUT_OF_RANGE),
            (SendListOffsets(state.current_leader_epoch),),
        )
    if event.error is not ErrorCode.NONE:
        return _on_error(state, event.error, now, settings)
    state = attrs.evolve(state, leader_not_ready=0)
    if event.diverging_epoch is not None:
        return _truncate(state, event.diverging_epoch, log)
    if event.records_end_offset is None or event.records_end_offset <= state.fetch_offset:
        high_watermark = min(event.high_watermark, log.log_end_offset)
        return Transition(state, (UpdateHighWatermark(high_watermark),))
    end = event.records_end_offset
    moved = attrs.evolve(state, fetch_offset=end)
    return Transition(
        moved, (AppendAsFollower(end), UpdateHighWatermark(min(event.high_watermark, end)))
    )


def _on_leader_offsets(
    state: PartitionFetchState, event: LeaderOffsetsAnswered, log: LocalLog
) -> Transition:
    fetching = attrs.evolve(state, phase=FetchPhase.FETCHING)
    if event.log_end_offset < log.log_end_offset:
        # The leader's log is shorter (an unclean election happened): follow it.
        offset = event.log_end_offset
        return Transition(attrs.evolve(fetching, fetch_offset=offset), (Truncate(offset),))
    if event.log_start_offset > log.log_end_offset:
        # The leader deleted what this replica needs next.
        offset = event.log_start_offset
        moved = attrs.evolve(fetching, fetch_offset=offset)
        return Transition(moved, (TruncateFullyAndStartAt(offset),))
    return Transition(attrs.evolve(fetching, fetch_offset=log.log_end_offset))


def _on_error(
    state: PartitionFetchState, error: ErrorCode, now: float, settings: FetcherSettings
) -> Transition:
    if error is ErrorCode.FENCED_LEADER_EPOCH:
        # Our epoch is older than the leader's: the controller's newer state will come.
        return Transition(None, (RemovePartition(error),))
    # NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (the leader has not heard of its own
    # election yet), UNKNOWN_TOPIC_OR_PARTITION and the rest: back off, then retry.
    backoff_ms = settings.replica_fetch_backoff_ms
    not_ready = state.leader_not_ready
    if error in LEADER_NOT_READY:
        backoff_ms = min(backoff_ms, LEADER_NOT_READY_FIRST_BACKOFF_MS << min(not_ready, 16))
        not_ready += 1
    delayed_until = now + backoff_ms / 1000
    return Transition(attrs.evolve(state, delayed_until=delayed_until, leader_not_ready=not_ready))
