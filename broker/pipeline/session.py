"""A SparkSession set up for the broker: the format registered, workers on our venv."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from broker.pipeline.options import FORMAT_NAME

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def worker_environment() -> dict[str, str]:
    """What Python workers need to import this package: our interpreter and path."""
    path = os.environ.get("PYTHONPATH", "")
    parts = [p for p in path.split(os.pathsep) if p]
    if _REPO_ROOT not in parts:
        parts.insert(0, _REPO_ROOT)
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(parts),
    }


def build_session(
    master: str = "local[*]",
    app_name: str = "trio-kafka-pipeline",
    conf: dict[str, str] | None = None,
) -> Any:
    """Create (or reuse) the session; the environment is set before the JVM starts."""
    os.environ.update(worker_environment())
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", worker_environment()["PYTHONPATH"])
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.pyspark.python", sys.executable)
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def register(spark: Any) -> None:
    from broker.pipeline.data_source import TrioKafkaDataSource

    spark.dataSource.register(TrioKafkaDataSource)


__all__ = ["FORMAT_NAME", "build_session", "register", "worker_environment"]
