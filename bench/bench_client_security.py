"""The pipeline's blocking Kafka client over PLAINTEXT, SSL and SASL_SSL, in one run.

What a Spark task pays for security: every input partition opens its own connection
(TCP, the TLS handshake, ApiVersions, then for SASL_SSL SaslHandshake and the SCRAM
exchange, the client's PBKDF2 included), then fetches its offset range. One `broker serve`
process with the three listeners (certificates made for the run with trustme) serves the
same topic to each, so the rows compare like with like: connections set up per second
(connect + Metadata + close) and Fetch throughput of 1 KiB records in 4 MiB fetches.
Every loop is bounded in time and count.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trustme

from bench.servers import start_broker_listeners, stop_server
from broker.client.cli import main as client_main
from broker.client.security_config import SecurityConfig, parse_security_properties
from broker.pipeline.kafka_client import KafkaClient
from broker.protocol.records import Record, encode_batch

TOPIC = "bench-secure"
VALUE_SIZE = 1024
RECORDS_PER_BATCH = 1000
FILL_BYTES = 64 << 20
FETCH_BYTES = 4 << 20
MAX_CONNECTS = 100_000
MAX_FETCHES = 1_000_000


def _start_broker(work: Path, ca: trustme.CA) -> tuple[Any, dict[str, int]]:
    server_pem = work / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    return start_broker_listeners(
        work,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": str(server_pem),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        },
    )


def _fill(bootstrap: str) -> int:
    with KafkaClient.connect(bootstrap) as client:
        client.create_topic(TOPIC, 1)
        value = b"x" * VALUE_SIZE
        batch = encode_batch([Record(i, 0, None, value) for i in range(RECORDS_PER_BATCH)])
        written = 0
        while written < FILL_BYTES:
            client.produce({(TOPIC, 0): batch}, acks=1)
            written += len(batch)
        return client.list_offsets({(TOPIC, 0): -1})[(TOPIC, 0)]


def _connects_per_s(bootstrap: str, security: SecurityConfig, duration_s: float) -> float:
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < duration_s and done < MAX_CONNECTS:
        with KafkaClient.connect(bootstrap, security=security) as client:
            client.partitions_for([TOPIC])
        done += 1
    return done / (time.perf_counter() - started)


def _fetch_mib_per_s(
    bootstrap: str, security: SecurityConfig, end: int, duration_s: float
) -> float:
    got = 0
    fetches = 0
    with KafkaClient.connect(bootstrap, security=security) as client:
        started = time.perf_counter()
        offset = 0
        while time.perf_counter() - started < duration_s and fetches < MAX_FETCHES:
            fetched = client.fetch(TOPIC, 0, offset, max_bytes=FETCH_BYTES, max_wait_ms=0)
            fetches += 1
            got += len(fetched.records)
            # Whole batches of RECORDS_PER_BATCH records; wrap around at the end.
            offset += RECORDS_PER_BATCH * max(1, len(fetched.records) // _batch_size())
            if offset >= end:
                offset = 0
        return got / (1 << 20) / (time.perf_counter() - started)


def _batch_size() -> int:
    return len(
        encode_batch([Record(i, 0, None, b"x" * VALUE_SIZE) for i in range(RECORDS_PER_BATCH)])
    )


def run(duration_s: float = 5.0) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-client-security-") as tmp:
        work = Path(tmp)
        ca = trustme.CA()
        ca_pem = work / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_pem))
        process, ports = _start_broker(work, ca)
        try:
            plain = f"127.0.0.1:{ports['PLAINTEXT']}"
            with contextlib.redirect_stdout(io.StringIO()):
                user = ["bench", "--mechanism", "SCRAM-SHA-512", "--password", "bench-pw"]
                code = client_main(["users", "scram", "set", *user, "-b", plain])
            assert code == 0
            end = _fill(plain)
            tls = {"ssl.ca.location": str(ca_pem)}
            configs = {
                "PLAINTEXT": (plain, {}),
                "SSL": (f"127.0.0.1:{ports['SSL']}", {"security.protocol": "SSL", **tls}),
                "SASL_SSL SCRAM-SHA-512": (
                    f"127.0.0.1:{ports['SASL_SSL']}",
                    {
                        "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": "bench",
                        "sasl.password": "bench-pw",
                        **tls,
                    },
                ),
            }
            for label, (bootstrap, properties) in configs.items():
                security = parse_security_properties(properties)
                connects = _connects_per_s(bootstrap, security, duration_s / 2)
                rows.append(
                    {
                        "client": "pipeline KafkaClient",
                        "protocol": label,
                        "connections/s": connects,
                        "ms per connection": 1000 / connects if connects else float("nan"),
                        "fetch MiB/s": _fetch_mib_per_s(bootstrap, security, end, duration_s / 2),
                    }
                )
        finally:
            stop_server(process)
    return rows


if __name__ == "__main__":
    for row in run(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0):
        print(row)
