"""A hypothesis state machine over the transaction coordinator: random sequences of
InitProducerId, AddPartitionsToTxn, EndTxn (from current and fenced producers),
timeouts and restarts, checked against a small model of Kafka's rules."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import attrs
import trio
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.protocol.error_codes import ErrorCode
from broker.transaction.transaction_state import TransactionState
from tests.transaction.helpers import (
    Clock,
    Ids,
    RecordingMarkers,
    RecordingOffsets,
    make_coordinator,
    txn_offset_commit,
)

T = TypeVar("T")
TIDS = st.sampled_from(["a", "b"])
PARTITIONS = st.sets(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 2)), min_size=1)
TIMEOUT_MS = 1000
S = TransactionState


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return trio.run(fn)


@attrs.define
class Model:
    producer_id: int
    epoch: int = 0
    state: TransactionState = S.EMPTY
    partitions: set[tuple[str, int]] = attrs.field(factory=set)
    pending: dict[tuple[str, int], int] = attrs.field(factory=dict)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="txn-sm-"))
        self.offsets = RecordingOffsets()
        self.markers = RecordingMarkers(self.offsets)
        self.committed_offsets: dict[tuple[str, int], int] = {}
        self.clock = Clock()
        self.ids = Ids()
        self.coordinator = make_coordinator(
            self.directory,
            markers=self.markers,
            offsets=self.offsets,
            clock=self.clock,
            ids=self.ids,
        )
        self.model: dict[str, Model] = {}
        self.expected_markers: dict[tuple[str, int], list[tuple[int, int, bool]]] = {}

    def teardown(self) -> None:
        self.coordinator.journal.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _expect_markers(self, m: Model, epoch: int, commit: bool) -> None:
        for tp in m.partitions:
            self.expected_markers.setdefault(tp, []).append((m.producer_id, epoch, commit))

    @rule(tid=TIDS)
    def init_producer_id(self, tid: str) -> None:
        result = run(lambda: self.coordinator.init_producer_id(tid, TIMEOUT_MS))
        assert result.error == ErrorCode.NONE
        m = self.model.get(tid)
        if m is None:
            self.model[tid] = Model(result.producer_id)
            assert result.producer_epoch == 0
            return
        if m.state is S.ONGOING:
            self._expect_markers(m, m.epoch + 1, False)
            m.epoch += 2
        else:
            m.epoch += 1
        m.state, m.partitions, m.pending = S.EMPTY, set(), {}
        assert (result.producer_id, result.producer_epoch) == (m.producer_id, m.epoch)

    @rule(tid=TIDS, partitions=PARTITIONS, fenced=st.booleans())
    def add_partitions(self, tid: str, partitions: set[tuple[str, int]], fenced: bool) -> None:
        m = self.model.get(tid)
        if m is None:
            return
        epoch = m.epoch - 1 if fenced else m.epoch
        error = run(lambda: self.coordinator.add_partitions(tid, m.producer_id, epoch, partitions))
        if fenced:
            assert error == ErrorCode.PRODUCER_FENCED
            return
        assert error == ErrorCode.NONE
        if m.state is not S.ONGOING:
            m.partitions = set()
        m.state = S.ONGOING
        m.partitions |= partitions

    @rule(tid=TIDS, commit=st.booleans(), fenced=st.booleans())
    def end_txn(self, tid: str, commit: bool, fenced: bool) -> None:
        m = self.model.get(tid)
        if m is None:
            return
        epoch = m.epoch - 1 if fenced else m.epoch
        error = run(lambda: self.coordinator.end_txn(tid, m.producer_id, epoch, commit))
        if fenced:
            assert error == ErrorCode.PRODUCER_FENCED
        elif m.state is S.ONGOING:
            assert error == ErrorCode.NONE
            self._expect_markers(m, m.epoch, commit)
            if commit:
                self.committed_offsets.update(m.pending)
            m.state, m.partitions = (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT), set()
            m.pending = {}
        elif m.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            assert error == ErrorCode.NONE
        else:
            assert error == ErrorCode.INVALID_TXN_STATE

    @rule()
    def time_passes_beyond_the_timeout(self) -> None:
        self.clock.now += TIMEOUT_MS + 1
        aborted = run(self.coordinator.abort_timed_out)
        expected = 0
        for m in self.model.values():
            if m.state is S.ONGOING:
                expected += 1
                self._expect_markers(m, m.epoch + 1, False)
                m.epoch += 1
                m.state, m.partitions, m.pending = S.COMPLETE_ABORT, set(), {}
        assert aborted == expected

    @rule(tid=TIDS, partition=st.integers(0, 1), offset=st.integers(0, 100))
    def commit_offsets_in_the_transaction(self, tid: str, partition: int, offset: int) -> None:
        m = self.model.get(tid)
        if m is None:
            return
        tp = ("in", partition)
        added = run(lambda: self.coordinator.add_offsets(tid, m.producer_id, m.epoch, "g"))
        assert added == ErrorCode.NONE
        if m.state is not S.ONGOING:
            m.partitions, m.pending = set(), {}
        m.state = S.ONGOING
        error = txn_offset_commit(
            self.coordinator, self.markers, tid, m.producer_id, m.epoch, "g", {tp: (offset, -1, "")}
        )
        assert error == ErrorCode.NONE
        m.pending[tp] = offset

    @rule()
    def restart(self) -> None:
        self.coordinator.journal.close()
        self.coordinator = make_coordinator(
            self.directory,
            markers=self.markers,
            offsets=self.offsets,
            clock=self.clock,
            ids=self.ids,
        )

    @invariant()
    def coordinator_agrees_with_the_model(self) -> None:
        assert set(self.coordinator.transactions) == set(self.model)
        for tid, m in self.model.items():
            meta = self.coordinator.transactions[tid]
            assert (meta.producer_id, meta.producer_epoch, meta.state) == (
                m.producer_id,
                m.epoch,
                m.state,
            )
            assert meta.partitions == m.partitions
        assert self.markers.markers == self.expected_markers
        committed = {tp: v[0] for tp, v in self.offsets.committed.get("g", {}).items()}
        assert committed == self.committed_offsets
        pending = {tp for m in self.model.values() for tp in m.pending}
        assert self.markers.pending_offsets("g") == pending

    @invariant()
    def only_an_open_transaction_lets_its_partitions_be_produced_to(self) -> None:
        for m in self.model.values():
            for tp in [("t", 0), ("u", 2)]:
                verdict = self.coordinator.verify_partition(m.producer_id, m.epoch, tp)
                allowed = m.state is S.ONGOING and tp in m.partitions
                assert (verdict == ErrorCode.NONE) == allowed


TestCoordinatorStateMachine = CoordinatorMachine.TestCase
TestCoordinatorStateMachine.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
