"""``broker pipeline archive | aggregate | run``: the Spark jobs from the command line."""

from __future__ import annotations

import argparse
import logging
import runpy
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

log = logging.getLogger("broker.pipeline")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="broker pipeline",
        description="Spark Structured Streaming jobs over the broker (format 'trio-kafka').",
    )
    commands = parser.add_subparsers(dest="job", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--bootstrap-servers", required=True, help="HOST:PORT[,HOST:PORT]")
        sub.add_argument("--subscribe", required=True, help="comma-separated topics")
        sub.add_argument("--checkpoint", required=True, help="checkpoint directory")
        sub.add_argument(
            "--available-now",
            action="store_true",
            help="process what is there now, then stop (default: run until SIGTERM)",
        )
        sub.add_argument("--trigger-interval", help="processing-time trigger, e.g. '5 seconds'")
        sub.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
        sub.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="extra source option, e.g. maxOffsetsPerTrigger=10000 (repeatable)",
        )

    archive = commands.add_parser("archive", help="archive topics to Parquet")
    common(archive)
    archive.add_argument("--output", required=True, help="Parquet output directory")

    aggregate = commands.add_parser("aggregate", help="windowed counts back to a topic")
    common(aggregate)
    aggregate.add_argument("--output-topic", required=True)
    aggregate.add_argument("--window", default="1 minute")
    aggregate.add_argument("--watermark", default="1 minute")
    aggregate.add_argument("--output-mode", choices=["update", "append"], default="update")

    run = commands.add_parser("run", help="run a job file with `spark` in its globals")
    run.add_argument("job_file")
    run.add_argument("--master", default="local[*]")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the job (sys.argv)")
    return parser


def _options(pairs: list[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--option expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s"
    )
    from broker.pipeline.session import build_session

    spark = build_session(args.master, app_name=f"broker-pipeline-{args.job}")
    spark.sparkContext.setLogLevel("WARN")
    try:
        if args.job == "run":
            sys.argv = [args.job_file, *args.args]
            runpy.run_path(args.job_file, init_globals={"spark": spark}, run_name="__main__")
            return 0
        from broker.pipeline import jobs

        common: dict[str, Any] = {
            "bootstrap": args.bootstrap_servers,
            "subscribe": args.subscribe,
            "checkpoint": args.checkpoint,
            "available_now": args.available_now,
            "trigger_interval": args.trigger_interval,
            "options": _options(args.option),
        }
        if args.job == "archive":
            query = jobs.start_archive(spark, output=args.output, **common)
        else:
            query = jobs.start_aggregate(
                spark,
                output_topic=args.output_topic,
                window=args.window,
                watermark=args.watermark,
                output_mode=args.output_mode,
                **common,
            )
        return _await(query)
    finally:
        spark.stop()


def _await(query: Any) -> int:
    """Wait for the query; SIGTERM/SIGINT stop it cleanly (after the running batch)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: stopping the query", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
        if query.isActive:
            query.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    error = query.exception()
    if error is not None:
        log.error("query failed: %s", error)
        return 1
    progress = query.recentProgress
    rows = sum(p.get("numInputRows", 0) for p in progress) if progress else 0
    log.info("query %s stopped after %d micro-batches, %d rows", query.name, len(progress), rows)
    time.sleep(0)  # let the JVM flush its logs before the session stops
    return 0
