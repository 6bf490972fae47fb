"""``broker pipeline archive | aggregate | run``: the Spark jobs from the command line."""

from __future__ import annotations

import argparse
import logging
import os
import re
import runpy
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import tenacity

log = logging.getLogger("broker.pipeline")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="broker pipeline",
        description="Spark Structured Streaming jobs over the broker (format 'trio-kafka').",
    )
    commands = parser.add_subparsers(dest="job", required=True)

    def verbose(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--verbose",
            action="store_true",
            help="show Spark's log in the terminal (default: written to a file, named on error)",
        )

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
        sub.add_argument(
            "--wait-for-topics",
            action="store_true",
            help="wait until the broker answers and the subscribed topics exist (default: "
            "fail at once), e.g. in a container started with the broker",
        )
        sub.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
        verbose(sub)
        sub.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="extra source option, e.g. maxOffsetsPerTrigger=10000 or"
            " kafka.security.protocol=SASL_SSL (repeatable; kafka.* security options also"
            " apply to the aggregate job's sink and to the preflight check)",
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
    verbose(run)
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


class PipelineError(Exception):
    """A problem the user can fix, reported as one line on stderr."""


class WaitableError(PipelineError):
    """A missing topic or an unreachable broker: ``--wait-for-topics`` waits these out."""


WAIT_RETRY_S = 2.0


def _preflight(args: argparse.Namespace) -> None:
    """Check what Spark would only report deep in its log: job file, broker, topics."""
    if args.job == "run":
        if not Path(args.job_file).is_file():
            raise PipelineError(f"job file {args.job_file} does not exist")
        return
    said = ""

    def say_once(state: tenacity.RetryCallState) -> None:
        nonlocal said
        assert state.outcome is not None
        reason = str(state.outcome.exception())
        if reason != said:
            said = reason
            print(f"broker pipeline {args.job}: waiting: {reason}", file=sys.stderr)

    # With --wait-for-topics, a missing topic or broker is waited out for as long as it
    # takes (the operator stops us), saying each new reason once; without it, it is raised.
    tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(WaitableError)
        if args.wait_for_topics
        else tenacity.retry_never,
        wait=tenacity.wait_fixed(WAIT_RETRY_S),
        before_sleep=say_once,
        reraise=True,
    )(_check_broker, args)


def _check_broker(args: argparse.Namespace) -> None:
    from broker.client.security_config import SecurityConfigError
    from broker.pipeline.kafka_client import KafkaClient, KafkaClientError
    from broker.pipeline.options import OptionError, security_from_options

    try:
        # The source's kafka.security.protocol, kafka.sasl.*, kafka.ssl.* options.
        security = security_from_options(_options(args.option))
    except OptionError as exc:
        raise PipelineError(str(exc)) from exc
    try:
        with KafkaClient.connect(
            args.bootstrap_servers, timeout_s=10.0, security=security
        ) as client:
            topics = [t.strip() for t in args.subscribe.split(",") if t.strip()]
            found = client.partitions_for(topics)
            missing = [t for t in topics if t not in found]
            if missing:
                raise WaitableError(
                    f"topic {', '.join(missing)} does not exist on {args.bootstrap_servers}"
                )
            if args.job == "aggregate":
                out = args.output_topic
                if out not in client.partitions_for([out], auto_create=True):
                    raise PipelineError(
                        f"output topic {out} does not exist and the broker does not "
                        f"auto-create topics: create it first (broker client topics create {out})"
                    )
    except SecurityConfigError as exc:
        raise PipelineError(str(exc)) from exc
    except OSError as exc:
        raise WaitableError(f"bootstrap server {args.bootstrap_servers}: {exc}") from exc
    except (ValueError, KafkaClientError) as exc:
        raise PipelineError(f"bootstrap server {args.bootstrap_servers}: {exc}") from exc


def _quiet_spark_log() -> str:
    """Point fd 2 (inherited by the JVM) at a log file; Python keeps the terminal's stderr."""
    fd, path = tempfile.mkstemp(prefix="broker-pipeline-", suffix=".log")
    terminal = os.dup(2)
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = os.fdopen(terminal, "w", buffering=1)
    return path


_SPARK_PREFIX = re.compile(r"^\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ")


def _one_line(error: BaseException) -> str:
    """The cause in one line: the Python exception at the end of the last traceback in
    Spark's message (a source or sink error wrapped in ``[STREAM_FAILED] ...``), else the
    message's first line."""
    text = str(error).strip() or type(error).__name__
    _, found, traceback = text.rpartition("Traceback (most recent call last):")
    if found:
        for line in traceback.splitlines():
            if line.strip() and not line[0].isspace():
                return line.strip()
    return _SPARK_PREFIX.sub("", text.splitlines()[0])


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s [%(name)s] %(message)s",
    )
    try:
        _preflight(args)
    except PipelineError as exc:
        print(f"broker pipeline {args.job}: error: {exc}", file=sys.stderr)
        return 2
    spark_log = None if args.verbose else _quiet_spark_log()
    where = "" if spark_log is None else f" (Spark's log: {spark_log})"
    try:
        code = _run(args, where)
    except Exception as exc:  # one line for the user, the rest is in the log
        if args.verbose:
            raise
        print(f"broker pipeline {args.job}: error: {_one_line(exc)}{where}", file=sys.stderr)
        return 1
    if code == 0 and spark_log is not None:
        # Kept only when it explains a failure (the error line names it).
        Path(spark_log).unlink(missing_ok=True)
    return code


def _run(args: argparse.Namespace, where: str) -> int:
    from broker.pipeline.session import build_session

    spark = build_session(args.master, app_name=f"broker-pipeline-{args.job}")
    spark.sparkContext.setLogLevel("INFO" if args.verbose else "WARN")
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
        return _await(query, args.job, where)
    finally:
        spark.stop()


def _await(query: Any, job: str = "", where: str = "") -> int:
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
        print(
            f"broker pipeline {job}: error: query failed: {_one_line(error)}{where}",
            file=sys.stderr,
        )
        return 1
    progress = query.recentProgress
    rows = sum(p.get("numInputRows", 0) for p in progress) if progress else 0
    log.info("query %s stopped after %d micro-batches, %d rows", query.name, len(progress), rows)
    time.sleep(0)  # let the JVM flush its logs before the session stops
    return 0
