"""The checker's part for transactions (sans-IO): what a read_committed consumer reads
back after the faults against what a transactional producer saw of each transaction.

The producer notes each transaction it begins (its values per partition, in producing
order) and how it ended:

- COMMITTED: commit_transaction returned;
- ABORTED: it never asked to commit (an abort meant, or an error before the commit), or
  its commit failed with an abortable error and abort_transaction then returned;
- UNKNOWN: the commit was asked for and then the producer gave up (a fatal error,
  retries exhausted): the coordinator may have written the commit or not.

`transaction_anomalies` compares that with every partition read back read_committed:

- a committed transaction is there whole: each of its values exactly once, in its
  partition, in producing order;
- nothing of an aborted transaction is there;
- an unknown transaction is there whole or not at all, in every partition alike;
- transactions follow each other in each partition in the order they were begun
  (one producer, one transaction at a time), and nothing is there that was never sent.

Values are `<transaction>/<partition>/<index>`, so a record names its transaction.
"""

from __future__ import annotations

from collections import defaultdict
from enum import Enum

import attrs

from tests.hosts.acknowledged_records import ReadBack


class Outcome(Enum):
    OPEN = "open"  # begun, not ended yet
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@attrs.frozen
class TransactionalValue:
    transaction: str
    partition: int
    index: int

    def encode(self) -> bytes:
        return f"{self.transaction}/{self.partition}/{self.index}".encode()

    @classmethod
    def decode(cls, value: bytes) -> TransactionalValue | None:
        parts = value.decode(errors="replace").split("/")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        return cls(parts[0], int(parts[1]), int(parts[2]))


@attrs.define
class Transaction:
    name: str
    values: dict[int, list[bytes]]  # partition: values in producing order
    begun_at: float
    outcome: Outcome = Outcome.OPEN
    ended_at: float = 0.0


@attrs.define
class TransactionHistory:
    """Written by the producer's thread only; read once it has finished."""

    transactions: dict[str, Transaction] = attrs.field(factory=dict)

    def begin(self, name: str, values: dict[int, list[bytes]], at: float = 0.0) -> None:
        self.transactions[name] = Transaction(name, values, at)

    def end(self, name: str, outcome: Outcome, at: float = 0.0) -> None:
        self.transactions[name].outcome = outcome
        self.transactions[name].ended_at = at

    def with_outcome(self, outcome: Outcome) -> list[Transaction]:
        return [t for t in self.transactions.values() if t.outcome is outcome]

    def summary(self) -> str:
        counts = {o.value: len(self.with_outcome(o)) for o in Outcome}
        ended = [t.ended_at - t.begun_at for t in self.transactions.values() if t.ended_at]
        longest = f"; the longest took {max(ended):.2f} s" if ended else ""
        return ", ".join(f"{n} {o}" for o, n in counts.items() if n) + longest


def transaction_anomalies(history: TransactionHistory, read: ReadBack) -> list[str]:
    """Everything the read_committed read-back breaks of the rules above; empty when none.
    A transaction still OPEN counts as UNKNOWN (the producer stopped inside it)."""
    found: list[str] = []
    order = {name: i for i, name in enumerate(history.transactions)}
    seen: dict[str, dict[int, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    for partition, records in read.items():
        last: tuple[int, str] | None = None
        for offset, value in records:
            decoded = TransactionalValue.decode(value)
            transaction = history.transactions.get(decoded.transaction) if decoded else None
            if decoded is None or transaction is None:
                found.append(f"{value!r} at {partition}/{offset} was never sent")
                continue
            if value not in transaction.values.get(partition, []):
                found.append(f"{value!r} at {partition}/{offset} was sent to another partition")
                continue
            seen[decoded.transaction][partition].append(value)
            position = order[decoded.transaction]
            if last is not None and position < last[0]:
                found.append(
                    f"{value!r} at {partition}/{offset} follows a record of {last[1]}, "
                    "begun after it"
                )
            last = (position, decoded.transaction)
    for name, transaction in history.transactions.items():
        found.extend(_transaction_anomalies(transaction, seen.get(name, {})))
    return sorted(found)


def _transaction_anomalies(transaction: Transaction, seen: dict[int, list[bytes]]) -> list[str]:
    name, outcome = transaction.name, transaction.outcome
    visible = {p: v for p, v in seen.items() if v}
    if outcome is Outcome.ABORTED:
        return [f"aborted {name} visible in partitions {sorted(visible)}"] if visible else []
    if outcome is not Outcome.COMMITTED and not visible:
        return []  # unknown, and not committed: allowed
    found: list[str] = []
    for partition, values in transaction.values.items():
        got = visible.get(partition, [])
        if got == values:
            continue
        if sorted(got) == sorted(values):
            found.append(f"{outcome.value} {name} out of order in partition {partition}: {got}")
        elif len(got) > len(set(got)):
            found.append(f"{outcome.value} {name} has a record twice in partition {partition}")
        else:
            missing = [v for v in values if v not in got]
            found.append(f"{outcome.value} {name} not whole: {missing} missing")
    return found
