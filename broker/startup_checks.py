"""Checks of what the config names outside itself, run before anything starts.

A config value can be well-formed and still unusable: a log dir that is a file, a
key store that does not exist. Found deep inside start-up, such a value became a
traceback (or, in a cluster, one per process) and exit code 1. Checked here, in
`broker serve` before the supervisor starts any process (and again in each process,
which may be started alone), it is one `ConfigError` line naming the key and the
file, and exit code 2 (`broker/__main__.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.config import BrokerConfig, ConfigError
from broker.meta_properties import META_PROPERTIES
from broker.net.channel_security import ListenerSecurity
from broker.security.scram_credentials import CREDENTIALS_FILE, ScramCredentialStore


def check_startup_config(config: BrokerConfig) -> None:
    """Raise ConfigError for the first unusable log dir or listener security setting."""
    check_log_dirs(config)
    check_no_process_logs_below(config)
    check_listener_security(config)


def check_log_dirs(config: BrokerConfig) -> None:
    """Each log dir is a writable directory, created when missing (as the log would)."""
    key = "log.dir" if config.is_set("log.dir") and not config.is_set("log.dirs") else "log.dirs"
    for log_dir in config.log_dirs:
        path = Path(log_dir)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{key}: {log_dir} is a file, not a directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"{key}: cannot create the log directory {log_dir}: {exc.strerror or exc}"
            ) from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{key}: the log directory {log_dir} is not writable")


def check_no_process_logs_below(config: BrokerConfig) -> None:
    """A host among hosts lowered to one process: that broker keeps its log at the top
    of each log dir, where the processes of the host it was kept theirs in
    `node-<id>` dirs. It would not see them, and would take each for a partition dir of
    a topic `node` that ZooKeeper does not have and delete it as a stray log. Refused
    instead (the reverse of the supervisor's check, broker/cluster/supervisor.py)."""
    if config.cluster.zookeeper_connect is None:
        return
    if config.cluster.processes != 1:
        return
    for log_dir in config.log_dirs:
        path = Path(log_dir)
        nodes = sorted(
            entry.name
            for entry in path.glob("node-*")
            if entry.name.removeprefix("node-").isdigit() and (entry / META_PROPERTIES).exists()
        )
        if nodes:
            raise ConfigError(
                f"log.dirs: {log_dir} holds the logs of a host of several processes"
                f" ({', '.join(nodes)}); with zookeeper.connect and process.count=1 the broker"
                f" keeps its log at the top of the dir and would delete those as stray:"
                f" set process.count to the host's processes again, or move node-<node.id>'s"
                f" content to the top of the dir"
            )


def check_listener_security(config: BrokerConfig) -> None:
    """Build every listener's TLS context and SASL settings as the socket server will:
    key and trust stores are read, JAAS configs parsed, principal rules compiled."""
    credentials = ScramCredentialStore(Path(config.log_dirs[0]) / CREDENTIALS_FILE)
    for endpoint in config.listeners:
        ListenerSecurity.for_endpoint(config, endpoint, credentials)
