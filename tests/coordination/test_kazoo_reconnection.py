"""How often the ZooKeeper engine tries a server that does not answer: at least every
1.4 s however long it has been trying (kazoo's default doubles the wait up to an hour,
so a ZooKeeper back after a 10 s outage was reached only 5-10 s later, past the
sessions' timeout). No ZooKeeper here: a socket that accepts and closes stands for one
that is down."""

from __future__ import annotations

import itertools
import socket
import threading
import time

import pytest

from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from broker.coordination.store import CoordinationUnavailable

TRYING_S = 7.0  # kazoo's default would wait 3.2 s between its 6th and 7th attempts


async def test_an_unanswering_zookeeper_is_tried_again_at_least_every_one_and_a_half_s() -> None:
    attempts: list[float] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.2)
        stop = threading.Event()

        def accept_and_close() -> None:
            while not stop.is_set():
                try:
                    connection, _ = server.accept()
                except TimeoutError:
                    continue
                attempts.append(time.monotonic())
                connection.close()

        acceptor = threading.Thread(target=accept_and_close)
        acceptor.start()
        port = server.getsockname()[1]
        settings = ZooKeeperSettings(
            f"127.0.0.1:{port}", session_timeout_ms=3000, connection_timeout_ms=int(TRYING_S * 1000)
        )
        started = time.monotonic()
        try:
            with pytest.raises(CoordinationUnavailable):
                await KazooCoordinationStore(settings).connect()
        finally:
            stop.set()
            acceptor.join()
    moments = [started, *attempts, time.monotonic()]
    gaps = [later - earlier for earlier, later in itertools.pairwise(moments)]
    assert len(attempts) >= 5, attempts
    assert max(gaps) < 2.5, gaps
