"""`transactions list|describe|abort`, as kafka-transactions.sh.

`list` asks every broker (each coordinator lists only its own transactional ids);
`describe` asks the id's coordinator. `abort` ends a hanging transaction on one
partition the way Kafka's tool does: DescribeProducers on the partition's leader finds
the producer's epoch and open transaction, then WriteTxnMarkers (ABORT) goes to that
leader, which needs CLUSTER_ACTION where an authorizer is configured.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from broker.client.admin_routing import (
    TRANSACTION_KEY,
    coordinator_session,
    every_broker,
    leader_session,
)
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.subcommands import Parsers, add_command
from broker.protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)
from broker.protocol.messages.describe_producers_request import TopicRequest
from broker.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)

EXAMPLES = """examples:
  broker client transactions list
  broker client transactions list --state Ongoing --json
  broker client transactions describe my-txn-id
  broker client transactions abort --topic orders --partition 0 --producer-id 1000
  broker client transactions abort --topic orders --partition 0 --start-offset 42
"""


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    transactions = commands.add_parser(
        "transactions", help="list, describe or abort transactions (as kafka-transactions.sh)"
    ).add_subparsers(dest="action", required=True)
    p = add_command(
        transactions,
        common,
        "list",
        transactions_list,
        "transactional ids of every broker",
        EXAMPLES,
    )
    p.add_argument(
        "--state", action="append", default=[], metavar="STATE", help="only ids in STATE"
    )
    p = add_command(
        transactions,
        common,
        "describe",
        transactions_describe,
        "a transactional id's state",
        EXAMPLES,
    )
    p.add_argument("transactional_id", metavar="TXN_ID")
    p = add_command(
        transactions,
        common,
        "abort",
        transactions_abort,
        "abort a hanging transaction on one partition (WriteTxnMarkers)",
        EXAMPLES,
    )
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    producer = p.add_mutually_exclusive_group(required=True)
    producer.add_argument("--producer-id", type=int, help="the producer whose transaction to end")
    producer.add_argument(
        "--start-offset", type=int, help="the first offset of the transaction to end"
    )
    p.add_argument(
        "--producer-epoch", type=int, help="with --producer-id (default: as DescribeProducers says)"
    )
    p.add_argument(
        "--coordinator-epoch",
        type=int,
        help="with --producer-id (default: as DescribeProducers says)",
    )


async def transactions_list(session: ClientSession, args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for node, broker in await every_broker(session):
        response = await broker.call(ListTransactionsRequest(state_filters=tuple(args.state)))
        check_error(response.error_code, f"ListTransactions on broker {node}")
        if response.unknown_state_filters:
            raise ClientError(f"unknown state(s): {', '.join(response.unknown_state_filters)}")
        rows.extend(
            {
                "transactional_id": t.transactional_id,
                "coordinator": node,
                "producer_id": t.producer_id,
                "state": t.transaction_state,
            }
            for t in response.transaction_states
        )
    rows.sort(key=lambda r: r["transactional_id"])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'TransactionalId':<32} {'Coordinator':>11} {'ProducerId':>10} TransactionState")
    for r in rows:
        print(
            f"{r['transactional_id']:<32} {r['coordinator']:>11} {r['producer_id']:>10} {r['state']}"
        )
    return 0


async def transactions_describe(session: ClientSession, args: argparse.Namespace) -> int:
    tid = args.transactional_id
    node, coordinator = await coordinator_session(session, tid, TRANSACTION_KEY)
    response = await coordinator.call(DescribeTransactionsRequest(transactional_ids=(tid,)))
    (state,) = response.transaction_states
    check_error(state.error_code, f"transactional id {tid!r}")
    started = state.transaction_start_time_ms
    row = {
        "coordinator": node,
        "transactional_id": state.transactional_id,
        "producer_id": state.producer_id,
        "producer_epoch": state.producer_epoch,
        "state": state.transaction_state,
        "transaction_timeout_ms": state.transaction_timeout_ms,
        "transaction_start_time_ms": started if started >= 0 else None,
        "transaction_duration_ms": int(time.time() * 1000) - started if started >= 0 else None,
        "topic_partitions": [f"{t.topic}-{p}" for t in state.topics for p in t.partitions],
    }
    if args.json:
        print(json.dumps(row, indent=2))
        return 0
    for key, value in row.items():
        shown = ",".join(value) if isinstance(value, list) else value
        print(f"{key}: {'-' if shown is None or shown == '' else shown}")
    return 0


async def _find_producer(
    leader: ClientSession, args: argparse.Namespace
) -> tuple[int, int, int, int]:
    """(producer id, epoch, coordinator epoch, txn start offset) of the transaction to end."""
    body = DescribeProducersRequest(
        topics=(TopicRequest(name=args.topic, partition_indexes=(args.partition,)),)
    )
    response = await leader.call(body)
    where = f"{args.topic}-{args.partition}"
    producers = []
    for topic in response.topics:
        for p in topic.partitions:
            check_error(p.error_code, f"DescribeProducers {where}", p.error_message)
            producers.extend(p.active_producers)
    for state in producers:
        if args.start_offset is not None:
            found = state.current_txn_start_offset == args.start_offset
        else:
            found = state.producer_id == args.producer_id
        if found and state.current_txn_start_offset >= 0:
            return (
                state.producer_id,
                state.producer_epoch,
                state.coordinator_epoch,
                state.current_txn_start_offset,
            )
    which = (
        f"starting at offset {args.start_offset}"
        if args.start_offset is not None
        else f"of producer {args.producer_id}"
    )
    raise ClientError(f"no open transaction {which} on {where}")


async def transactions_abort(session: ClientSession, args: argparse.Namespace) -> int:
    leader = await leader_session(session, args.topic, args.partition)
    if args.producer_id is not None and None not in (args.producer_epoch, args.coordinator_epoch):
        pid, epoch, coordinator_epoch, start = (
            args.producer_id,
            args.producer_epoch,
            args.coordinator_epoch,
            -1,
        )
    else:
        pid, epoch, coordinator_epoch, start = await _find_producer(leader, args)
        epoch = epoch if args.producer_epoch is None else args.producer_epoch
    marker = WritableTxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        transaction_result=False,
        topics=(WritableTxnMarkerTopic(name=args.topic, partition_indexes=(args.partition,)),),
        coordinator_epoch=coordinator_epoch,
    )
    response = await leader.call(WriteTxnMarkersRequest(markers=(marker,)))
    where = f"{args.topic}-{args.partition}"
    for result in response.markers:
        for topic in result.topics:
            for p in topic.partitions:
                check_error(p.error_code, f"aborting producer {pid}'s transaction on {where}")
    row = {
        "topic": args.topic,
        "partition": args.partition,
        "producer_id": pid,
        "producer_epoch": epoch,
        "coordinator_epoch": coordinator_epoch,
        "transaction_start_offset": start if start >= 0 else None,
    }
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"aborted the transaction of producer {pid} (epoch {epoch}) on {where}")
    return 0
