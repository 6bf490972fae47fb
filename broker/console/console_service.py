"""The HTTP port of a broker or a cluster's supervisor: /metrics and the console.

`http_port_for` builds it from the config: `metrics.port` (-1: none) on the host of
the first listener, the console unless `console.enable=false`. The console speaks
Kafka to a listener of the cluster (`console_listener`): a SASL_PLAINTEXT one with a
SCRAM mechanism if there is one (then it asks for a login), else a PLAINTEXT one.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.config import BrokerConfig
from broker.console.console_api import ConsoleApi
from broker.console.logins import Logins
from broker.console.web_app import web_app
from broker.http_port import HttpPort
from broker.metrics_http import MetricsSource

SCRAM = ("SCRAM-SHA-512", "SCRAM-SHA-256")


def console_listener(config: BrokerConfig) -> tuple[str, str | None]:
    """The listener the console uses, and the SCRAM mechanism to log in with (or None)."""
    mechanisms = config.security.sasl_enabled_mechanisms
    for endpoint in config.listeners:
        if endpoint.security_protocol == "SASL_PLAINTEXT":
            for mechanism in SCRAM:
                if mechanism in mechanisms:
                    return endpoint.listener_name, mechanism
    for endpoint in config.listeners:
        if endpoint.security_protocol == "PLAINTEXT":
            return endpoint.listener_name, None
    return config.listeners[0].listener_name, None


def connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def http_port_for(
    config: BrokerConfig,
    metrics: MetricsSource,
    bootstrap: Callable[[str], str | None],
) -> HttpPort | None:
    """`bootstrap(listener_name)` gives HOST:PORT of a broker's listener once it is up."""
    port = config.server.metrics_port
    if port < 0:
        return None
    console = None
    if config.server.console_enable:
        listener, mechanism = console_listener(config)
        console = ConsoleApi(Logins(lambda: bootstrap(listener), mechanism), metrics)
    what = "metrics and the web console" if console else "metrics"
    return HttpPort(web_app(metrics, console), config.listeners[0].host, port, what=what)
