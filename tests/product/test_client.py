"""`python -m broker.client` end to end against a live broker, as a user runs it."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.client.cli import build_parser
from broker.server import KafkaServer
from tests.client.cli_runner import CliResult, run_cli
from tests.integration.broker_harness import running_broker

ENV = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


class Client:
    def __init__(self, server: KafkaServer) -> None:
        self.bootstrap = f"127.0.0.1:{server.bound_port()}"

    async def run(
        self, *args: str, stdin: bytes = b"", bootstrap: str | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, "-m", "broker.client", *args]
        command += ["--bootstrap-server", bootstrap or self.bootstrap]
        with trio.fail_after(60):
            return await trio.run_process(
                command,
                stdin=stdin,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=ENV,
            )

    async def ok(self, *args: str, stdin: bytes = b"", bootstrap: str | None = None) -> bytes:
        """In-process (the codec's import time makes each process cost ~1.5 s)."""
        result = await self.in_process(*args, stdin=stdin, bootstrap=bootstrap)
        assert result.code == 0, result.err
        return result.out

    async def in_process(
        self, *args: str, stdin: bytes = b"", bootstrap: str | None = None
    ) -> CliResult:
        argv = [*args, "--bootstrap-server", bootstrap or self.bootstrap]
        return await trio.to_thread.run_sync(run_cli, argv, stdin)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        yield Client(server)


async def test_api_versions_lists_apis_with_the_usable_version(client: Client) -> None:
    out = (await client.ok("api-versions")).decode()
    assert "ApiVersions(18): 0 to 4 [usable: 4]" in out
    rows = json.loads(await client.ok("api-versions", "--json"))
    assert {"api_key": 18, "name": "ApiVersions"}.items() <= rows[
        [r["api_key"] for r in rows].index(18)
    ].items()


async def test_raw_api_versions_prints_the_decoded_response_as_json(client: Client) -> None:
    # v3 without client software name and version: INVALID_REQUEST, as Kafka answers.
    bare = json.loads((await client.run("raw", "18", "3", "{}")).stdout)
    assert bare["error_code"] == 42 and bare["api_keys"] == []
    body = '{"client_software_name": "cli", "client_software_version": "1"}'
    response = json.loads(await client.ok("raw", "18", "3", body))
    assert response["error_code"] == 0
    assert {"api_key": 18, "min_version": 0, "max_version": 4} in response["api_keys"]


async def test_raw_maps_nested_json_onto_the_request(client: Client) -> None:
    response = json.loads(
        await client.ok(
            "raw", "3", "12", '{"topics": [{"name": "nope"}], "allowAutoTopicCreation": false}'
        )
    )
    assert response["topics"][0]["name"] == "nope"
    assert response["topics"][0]["error_code"] == 3


async def test_raw_rejects_unknown_fields_in_one_line(client: Client) -> None:
    result = await client.run("raw", "18", "3", '{"bogus": 1}')
    assert result.returncode == 1
    assert result.stderr.decode().count("\n") == 1
    assert "unknown field 'bogus'" in result.stderr.decode()


async def test_topics_create_list_describe_delete(client: Client) -> None:
    out = await client.ok(
        "topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=60000"
    )
    assert out == b"created topic orders\n"
    assert b"orders\n" in await client.ok("topics", "list")
    described = (await client.ok("topics", "describe", "orders")).decode()
    assert "PartitionCount: 3" in described and "Partition: 2" in described
    metadata = json.loads(await client.ok("metadata", "orders", "--json"))
    assert len(metadata["topics"][0]["partitions"]) == 3
    again = await client.run("topics", "create", "orders")
    assert again.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in again.stderr
    assert await client.ok("topics", "delete", "orders") == b"deleted topic orders\n"
    assert b"orders\n" not in await client.ok("topics", "list")


async def test_produced_lines_are_consumed_back_exactly(client: Client) -> None:
    await client.ok("topics", "create", "lines")
    lines = b"first\nsecond line\n\nfourth\n"
    produced = await client.run("produce", "lines", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = await client.run("consume", "lines", "--from-beginning", "-e")
    assert consumed.returncode == 0 and consumed.stdout == lines


async def test_keys_headers_and_formats_round_trip(client: Client) -> None:
    await client.ok("topics", "create", "keyed", "--partitions", "2")
    await client.ok(
        "produce", "keyed", "-K", ":", "-H", "source=cli", "-p", "1", stdin=b"k1:v1\nk2:v:2\n"
    )
    out = await client.ok(
        "consume", "keyed", "-o", "beginning", "-e", "-f", "%t %p %o %k=%s [%h]\\n"
    )
    assert out == b"keyed 1 0 k1=v1 [source=cli]\nkeyed 1 1 k2=v:2 [source=cli]\n"
    keyed = await client.ok("consume", "keyed", "--from-beginning", "-e", "-K", "\t")
    assert keyed == b"k1\tv1\nk2\tv:2\n"


async def test_json_output_has_one_object_per_record(client: Client) -> None:
    await client.ok("topics", "create", "js")
    await client.ok("produce", "js", "-K", "=", "-H", "h=1", stdin=b"a=1\nb=2\n")
    out = await client.ok("consume", "js", "--from-beginning", "--json", "--max-messages", "2")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"], r["offset"]) for r in records] == [("a", "1", 0), ("b", "2", 1)]
    assert records[0]["headers"] == [{"key": "h", "value": "1"}]
    assert records[0]["topic"] == "js" and records[0]["timestamp"] > 0


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_batches_are_consumed_back(client: Client, codec: str) -> None:
    await client.ok("topics", "create", codec)
    lines = b"".join(b"record %d\n" % i for i in range(50))
    await client.ok("produce", codec, "--compression", codec, stdin=lines)
    assert await client.ok("consume", codec, "--from-beginning", "-e") == lines


async def test_offsets_and_max_messages_select_records(client: Client) -> None:
    await client.ok("topics", "create", "offs")
    await client.ok("produce", "offs", "-p", "0", stdin=b"a\nb\nc\nd\n")
    assert await client.ok("consume", "offs", "--offset", "2", "-e") == b"c\nd\n"
    assert await client.ok("consume", "offs", "-o", "-1", "-e") == b"d\n"
    assert await client.ok("consume", "offs", "--from-beginning", "--max-messages", "1") == b"a\n"
    past_end = await client.run("consume", "offs", "-o", "1000", "-e")
    assert past_end.returncode == 1
    assert past_end.stderr == (
        b"error: offset 1000 is out of range for offs-0 (the log holds offsets 0 to 4, exclusive)\n"
    )


async def test_unknown_topic_fails_with_the_error_name(client: Client) -> None:
    result = await client.run("consume", "ghost", "-e")
    assert result.returncode == 1
    assert result.stderr == b"error: topic 'ghost': UNKNOWN_TOPIC_OR_PARTITION\n"


async def test_produce_creates_a_missing_topic_as_kcat_does(client: Client) -> None:
    await client.ok("produce", "fresh-topic", stdin=b"one\ntwo\n")
    assert await client.ok("consume", "fresh-topic", "--from-beginning", "-e") == b"one\ntwo\n"


async def test_produce_does_not_create_a_topic_when_the_broker_forbids_it(
    tmp_path: Path,
) -> None:
    overrides = {"metrics.port": "-1", "auto.create.topics.enable": "false"}
    async with running_broker(tmp_path, overrides) as server:
        result = await Client(server).run("produce", "ghost", stdin=b"x\n")
    assert result.returncode == 1
    assert result.stderr == b"error: topic 'ghost': UNKNOWN_TOPIC_OR_PARTITION\n"


async def test_connection_refused_is_one_line_and_exit_code_one(client: Client) -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await client.run("api-versions", bootstrap=f"127.0.0.1:{port}")
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert (
        stderr.startswith(f"error: cannot connect to 127.0.0.1:{port}") and stderr.count("\n") == 1
    )


async def test_groups_list_and_describe_answer(client: Client) -> None:
    assert (await client.run("groups", "list")).returncode == 0
    result = await client.run("groups", "describe", "nobody", "--json")
    assert result.returncode == 1
    assert result.stderr == b"error: group 'nobody' does not exist\n"


async def test_group_consumption_resumes_from_committed_offsets(client: Client) -> None:
    await client.ok("topics", "create", "grp", "--partitions", "2")
    await client.ok("produce", "grp", "-p", "0", stdin=b"a\nb\n")
    await client.ok("produce", "grp", "-p", "1", stdin=b"c\n")
    first = await client.ok(
        "consume", "grp", "-g", "g1", "--from-beginning", "-e", "-f", "%p:%s\\n"
    )
    assert sorted(first.splitlines()) == [b"0:a", b"0:b", b"1:c"]
    await client.ok("produce", "grp", "-p", "1", stdin=b"d\n")
    second = await client.ok("consume", "grp", "-g", "g1", "--from-beginning", "-e")
    assert second == b"d\n"
    groups = (await client.ok("groups", "list")).decode()
    assert groups.startswith("g1\t")


async def test_a_group_consumer_leaves_its_group_on_sigterm(client: Client) -> None:
    await client.ok("topics", "create", "term")
    command = [sys.executable, "-m", "broker.client", "consume", "term", "-g", "termers"]
    command += ["--bootstrap-server", client.bootstrap]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(trio.run_process, command, check=False, env=ENV)
        )
        with trio.fail_after(30):
            while (  # noqa: ASYNC110 - asks the broker over the wire: no event
                b"Stable"
                not in (await client.in_process("groups", "describe", "termers", "--state")).out
            ):
                await trio.sleep(0.2)
        table = (await client.ok("groups", "describe", "termers")).decode().splitlines()
        group, topic, partition, current, end, lag, member, host, client_id = table[2].split()
        assert (group, topic, partition, current, end, lag) == (
            "termers",
            "term",
            "0",
            "-",
            "0",
            "-",
        )
        assert member.startswith("broker-client-") and client_id == "broker-client"
        assert host.endswith("127.0.0.1"), table
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            code = await process.wait()
    assert code == 128 + signal.SIGTERM
    described = json.loads(await client.ok("groups", "describe", "termers", "--json"))
    assert described[0]["group_state"] == "Empty" and described[0]["members"] == []


async def test_groups_describe_shows_committed_offsets_and_lag(client: Client) -> None:
    await client.ok("topics", "create", "lagging", "--partitions", "2")
    await client.ok("produce", "lagging", "-p", "0", stdin=b"a\nb\n")
    await client.ok("produce", "lagging", "-p", "1", stdin=b"c\n")
    await client.ok("consume", "lagging", "-g", "lag1", "--from-beginning", "-e")
    await client.ok("produce", "lagging", "-p", "0", stdin=b"d\ne\nf\n")
    described = json.loads(await client.ok("groups", "describe", "lag1", "--json"))
    assert described[0]["group_id"] == "lag1"
    no_member = {"consumer_id": None, "host": None, "client_id": None}
    assert described[0]["offsets"] == [
        {"topic": "lagging", "partition": 0, "committed_offset": 2, "log_end_offset": 5, "lag": 3}
        | no_member,
        {"topic": "lagging", "partition": 1, "committed_offset": 1, "log_end_offset": 1, "lag": 0}
        | no_member,
    ]
    result = await client.in_process("groups", "describe", "lag1")
    assert result.err == "\nConsumer group 'lag1' has no active members.\n"
    table = result.out.decode().splitlines()
    assert table[0] == ""
    assert table[1].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert [row.split() for row in table[2:]] == [
        ["lag1", "lagging", "0", "2", "5", "3", "-", "-", "-"],
        ["lag1", "lagging", "1", "1", "1", "0", "-", "-", "-"],
    ]
    # Columns line up under their headings, as kafka-consumer-groups.sh prints them.
    assert table[2].index(" 5 ") + 1 == table[1].index("LOG-END-OFFSET")


async def test_quotas_are_described_as_the_numbers_they_were_set_to(client: Client) -> None:
    await client.ok(
        "quotas", "alter", "--entity-type", "users", "--entity-name", "alice",
        "--add-config", "producer_byte_rate=1048576,request_percentage=12.5",
    )  # fmt: skip
    described = await client.ok("quotas", "describe", "--entity-type", "users")
    assert described == (
        b"Quota configs for user=alice are producer_byte_rate=1048576, request_percentage=12.5\n"
    )
    as_json = json.loads(await client.ok("quotas", "describe", "--json"))
    assert as_json == [
        {
            "entity": {"user": "alice"},
            "quotas": {"producer_byte_rate": 1048576, "request_percentage": 12.5},
        }
    ]
    assert type(as_json[0]["quotas"]["producer_byte_rate"]) is int


async def test_produce_reports_each_refused_record_and_writes_the_rest(client: Client) -> None:
    await client.ok("topics", "create", "picky", "--config", "max.message.bytes=2000")
    lines = [b"line %d" % n for n in range(1, 31)]
    lines[14] = b"x" * 5000  # line 15: too large alone
    lines[22] = b"y" * 5000  # line 23
    result = await client.in_process(
        "produce", "picky", "--batch-size", "10", stdin=b"\n".join(lines) + b"\n"
    )
    assert result.code == 1
    report = result.err.splitlines()
    assert [line.split(" (")[0] for line in report[:2]] == [
        "% delivery failed for line 15",
        "% delivery failed for line 23",
    ]
    assert "picky-0): MESSAGE_TOO_LARGE" in report[0]
    assert report[2:] == ["error: 28 of 30 records written to picky, 2 failed (lines 15, 23)"]
    consumed = await client.ok("consume", "picky", "--from-beginning", "-e")
    assert consumed.splitlines() == [line for n, line in enumerate(lines, 1) if n not in (15, 23)]
    stopped = await client.in_process(
        "produce", "picky", "--batch-size", "10", "--stop-on-error",
        stdin=b"\n".join(lines) + b"\n",
    )  # fmt: skip
    assert stopped.code == 1
    assert stopped.err.splitlines()[-1] == (
        "error: 19 of 20 records written to picky, 1 failed (line 15)"
    )


async def test_the_next_bootstrap_address_is_tried_when_one_refuses(client: Client) -> None:
    closed = await free_port()
    both = f"127.0.0.1:{closed},{client.bootstrap}"
    assert b"ApiVersions(18)" in await client.ok("api-versions", bootstrap=both)
    nobody = await client.in_process("api-versions", bootstrap=f"127.0.0.1:{closed},[::1]:{closed}")
    assert nobody.code == 1
    assert nobody.err.startswith(
        "error: no bootstrap server reachable (cannot connect to 127.0.0.1:"
    )
    assert f"cannot connect to ::1:{closed}" in nobody.err and nobody.err.count("\n") == 1


async def free_port() -> int:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_bootstrap_address_without_a_port_means_9092() -> None:
    from broker.client.session import parse_bootstrap

    assert parse_bootstrap("localhost") == [("localhost", 9092)]
    assert parse_bootstrap("a:1, b ,[::1],[::1]:7,::1") == [
        ("a", 1),
        ("b", 9092),
        ("::1", 9092),
        ("::1", 7),
        ("::1", 9092),
    ]
    assert parse_bootstrap(":5") == [("127.0.0.1", 5)]


def test_a_command_failing_before_its_first_request_exits_one_every_time() -> None:
    # In the main thread, where the SIGTERM watcher runs: an error raised before the
    # watcher task had started used to end in TrioInternalError about 6 times in 10.
    for _ in range(20):
        result = run_cli(["api-versions", "-b", "localhost:port"])
        assert (result.code, result.err) == (
            1,
            "error: bad --bootstrap-server 'localhost:port': expected HOST[:PORT][,...]\n",
        )


COMMANDS = [
    [],
    ["api-versions"],
    ["metadata"],
    ["topics", "create"],
    ["topics", "delete"],
    ["topics", "list"],
    ["topics", "describe"],
    ["groups", "list"],
    ["groups", "describe"],
    ["produce"],
    ["consume"],
    ["raw"],
    ["acls", "add"],
    ["acls", "list"],
    ["acls", "remove"],
    ["users", "scram", "set"],
    ["users", "scram", "describe"],
    ["users", "scram", "delete"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c) or "top")
def test_every_command_has_help_with_an_example(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and "usage:" in out


async def test_help_runs_as_a_module_without_a_broker() -> None:
    result = await trio.run_process(
        [sys.executable, "-m", "broker.client", "consume", "--help"],
        capture_stdout=True,
        check=False,
        env=ENV,
    )
    assert result.returncode == 0 and b"--from-beginning" in result.stdout


def test_key_delimiter_escapes_work_as_in_kcat() -> None:
    from broker.client.output_format import unescape

    assert unescape("\\t") == b"\t"
    assert unescape(":") == b":"
    assert unescape("\\n\\\\") == b"\n\\"


def test_bootstrap_server_is_accepted_before_or_after_the_command() -> None:
    from broker.client.cli import parse_args
    from broker.client.session import DEFAULT_BOOTSTRAP

    assert parse_args(["-b", "h:1", "topics", "list"]).bootstrap_server == "h:1"
    assert parse_args(["topics", "list", "-b", "h:2"]).bootstrap_server == "h:2"
    assert parse_args(["--bootstrap-server", "h:3", "consume", "t"]).bootstrap_server == "h:3"
    assert parse_args(["api-versions"]).bootstrap_server == DEFAULT_BOOTSTRAP


def test_client_properties_are_accepted_before_or_after_the_command() -> None:
    from broker.client.cli import parse_args

    args = parse_args(["-X", "a=1", "--command-config", "f1", "metadata", "-X", "b=2"])
    assert args.properties == ["a=1", "b=2"] and args.command_config == ["f1"]
    args = parse_args(["topics", "list", "--command-config", "f2"])
    assert args.properties == [] and args.command_config == ["f2"]


async def test_topics_list_hides_internal_topics_unless_asked(client: Client) -> None:
    await client.ok("topics", "create", "visible", "__hidden-commits")
    assert await client.ok("topics", "list") == b"visible\n"
    listed = await client.ok("topics", "list", "--include-internal")
    assert listed == b"__hidden-commits\nvisible\n"


async def test_compacted_topics_are_created_described_and_show_tombstones(
    tmp_path: Path,
) -> None:
    overrides = {"metrics.port": "-1", "log.cleaner.backoff.ms": "50"}
    async with running_broker(tmp_path, overrides) as server:
        client = Client(server)
        configs = ["--config", "cleanup.policy=compact", "--config", "segment.bytes=200"]
        configs += ["--config", "min.cleanable.dirty.ratio=0.01"]
        await client.ok("topics", "create", "table", *configs)
        lines = b"".join(b"k%d:v%d\n" % (i % 3, i) for i in range(30)) + b"k0:\n"
        await client.ok("produce", "table", "-K", ":", "-Z", "--batch-size", "1", stdin=lines)
        with trio.fail_after(30):
            while True:
                out = await client.ok("consume", "table", "-o", "beginning", "-e", "-f", "%k=%s\\n")
                if out.count(b"\n") < 31:
                    break
                await trio.sleep(0.1)
        assert out.endswith(b"k1=v28\nk2=v29\nk0=NULL\n"), "latest values, the tombstone last"
        described = (await client.ok("topics", "describe", "table")).decode()
        assert "Cleaner: dirty ratio" in described and "last cleaned 20" in described
        keyless = await client.run("produce", "table", stdin=b"no key\n")
        assert keyless.returncode == 1 and b"INVALID_RECORD" in keyless.stderr
