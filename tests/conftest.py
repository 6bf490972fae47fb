"""Shared test settings: hypothesis profiles for local runs and for CI."""

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# The suites that start real clients, Spark, ZooKeeper, Docker or broker processes: `make unit`
# leaves them out (`-m "not slow"`), `make test` runs them. By directory, plus the modules
# (or single tests, `path::name`) that start a supervisor or broker processes or load a
# broker; a test elsewhere that needs a real client says so with `@pytest.mark.interop`.
SLOW_DIRECTORIES = frozenset({"interop", "pipeline", "product", "coordination", "streams"})
SLOW_TESTS = frozenset(
    {
        "tests/client/test_coordinator_rediscovery.py::"
        "test_a_real_cluster_sends_the_session_to_the_groups_new_coordinator",
        "tests/cluster/test_client_admin_routing.py",
        "tests/cluster/test_client_against_cluster.py",
        "tests/cluster/test_cluster_clients.py",
        "tests/cluster/test_load_placement.py",
        "tests/cluster/test_cluster_metrics.py",
        "tests/cluster/test_cluster_transactions.py",
        "tests/cluster/test_group_membership_restart.py",
        "tests/cluster/test_cluster_txn_verification.py",
        "tests/cluster/test_process_ports.py",
        "tests/cluster/test_routed_client.py",
        "tests/cluster/test_shared_broker_configs.py",
        "tests/cluster/test_shared_state.py",
        "tests/cluster/test_supervisor.py",
        "tests/hosts/test_hosts_cluster.py",
        "tests/hosts/test_reassignment_throttle.py",
        "tests/hosts/test_stray_logs.py",
        "tests/hosts/test_corrupt_replica_repair.py",
        "tests/hosts/test_internal_state.py",
        "tests/hosts/test_internal_state_consumer_groups.py",
        "tests/hosts/test_transactions_across_hosts.py",
        "tests/hosts/test_controlled_shutdown.py",
        "tests/hosts/test_faults.py",
        "tests/hosts/test_host_supervisors.py",
        "tests/hosts/test_inter_broker_sasl.py",
        "tests/hosts/test_whole_host_killed.py",
        "tests/hosts/test_zookeeper_loss.py",
        "tests/hosts/test_hosts_security_store.py",
        "tests/console/test_console_browser.py",  # a real browser
        "tests/integration/test_broker_process.py",
        "tests/integration/test_config_errors.py",
        "tests/integration/test_dynamic_config_restart.py",
        "tests/integration/test_hang_ups.py",
        "tests/integration/test_hostile_bench.py",
        "tests/integration/test_hostile_fairness.py",
        "tests/integration/test_hostile_load.py",
        "tests/integration/test_hostile_responses.py",
        "tests/integration/test_replication_bench.py",  # three hosts and ZooKeeper
        "tests/integration/test_versus_tansu_bench.py",
        "tests/log/test_durability.py",
        # Single tests that start broker processes, in modules that are otherwise fast.
        "tests/integration/test_client_quota_apis.py::"
        "test_broker_client_quotas_alter_and_describe_like_kafka_configs",
        "tests/test_config.py::test_a_bad_value_for_a_formerly_untyped_key_stops_startup_naming_it",
    }
)
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = item.path.resolve().relative_to(_TESTS.parent)
        function = getattr(item, "originalname", item.name)  # without parameters
        if (
            relative.parts[1] in SLOW_DIRECTORIES
            or relative.as_posix() in SLOW_TESTS
            or f"{relative.as_posix()}::{function}" in SLOW_TESTS
            or item.get_closest_marker("interop") is not None
        ):
            item.add_marker(pytest.mark.slow)


# `make suite` runs the tests on two pytest-xdist workers with `--dist loadfile`: each module
# is one unit of work (its module-scoped fixtures start once, its tests run in order on one
# worker), and so is each of these directories, whose session fixtures are costly (the
# pipeline's SparkSession and broker: one JVM, not one per worker). xdist's own
# `xdist_group` marks do not reach its scheduler under pytest 9 (it rewrites `item._nodeid`,
# which `item.nodeid` no longer reads), so the units are named here.
SHARED_SESSION_DIRECTORIES = frozenset({"pipeline"})


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class ModuleScheduling(LoadFileScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            parts = module.split("/")
            if len(parts) > 2 and parts[1] in SHARED_SESSION_DIRECTORIES:
                return "/".join(parts[:2])
            return module

    return ModuleScheduling(config, log)
