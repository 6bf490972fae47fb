"""Hosts that can be cut off the network: each host in its own network namespace, joined
to the test's namespace by a veth pair on one bridge, as machines on one switch.

Everything lives in namespaces the test creates and holds by file descriptor: the
test's own (ZooKeeper and the clients, on the bridge's address) and one per host (the
broker, on its veth end). Nothing is added to the machine's own network or firewall, so
a test that dies leaves nothing behind: a namespace goes when its last process and
descriptor do. Cutting a host off takes its link down on the bridge (every packet to and
from it dropped, as a pulled cable); healing brings it up again.

A network namespace belongs to a thread, not to a process (setns(2)): a thread entering
one (`NetworkNamespace.entered`) creates its sockets, threads and child processes there,
and returns to where it was on leaving. The addresses are from 198.18.0.0/15, the range
set aside for network tests (RFC 2544), reachable only inside these namespaces.
Creating namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), as CI runs; without
it the test fails saying so.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager

import attrs

CLONE_NEWNET = 0x40000000
BRIDGE_ADDRESS = "198.18.0.1"
PREFIX_LENGTH = 24
_LIBC = ctypes.CDLL(None, use_errno=True)


class NamespaceError(RuntimeError):
    """A namespace could not be made or entered (most often: not root)."""


def _check(result: int, what: str) -> None:
    if result == 0:
        return
    code = ctypes.get_errno()
    hint = ""
    if code == errno.EPERM:
        hint = (
            ": cutting a host off the network needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
            " to make network namespaces; CI runs the suite as root"
        )
    raise NamespaceError(f"{what} failed: {os.strerror(code)}{hint}")


def _this_threads_namespace() -> int:
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


@attrs.define
class NetworkNamespace:
    """A network namespace held open by a descriptor of this process."""

    fd: int

    @classmethod
    def create(cls) -> NetworkNamespace:
        """A new namespace, made by a short-lived thread so that the caller stays put."""
        made: list[int] = []
        failed: list[BaseException] = []

        def unshare() -> None:
            try:
                _check(_LIBC.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
                made.append(_this_threads_namespace())
            except BaseException as exc:  # handed to the caller's thread
                failed.append(exc)

        thread = threading.Thread(target=unshare, name="netns-create")
        thread.start()
        thread.join()
        if failed:
            raise failed[0]
        namespace = cls(made[0])
        namespace.ip("link", "set", "lo", "up")
        return namespace

    @contextmanager
    def entered(self) -> Iterator[None]:
        """The calling thread in this namespace, and back where it was afterwards."""
        before = _this_threads_namespace()
        try:
            _check(_LIBC.setns(self.fd, CLONE_NEWNET), "setns(CLONE_NEWNET)")
            try:
                yield
            finally:
                _check(_LIBC.setns(before, CLONE_NEWNET), "setns back")
        finally:
            os.close(before)

    def ip(self, *args: str) -> None:
        """`ip ARGS...` (iproute2) run inside this namespace."""
        with self.entered():
            done = subprocess.run([ip_command(), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise NamespaceError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    @property
    def path(self) -> str:
        """The namespace as `ip ... netns PATH` names it (valid in this process only)."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def close(self) -> None:
        os.close(self.fd)


def ip_command() -> str:
    found = shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise NamespaceError("iproute2's `ip` is missing: run `make setup`")
    return found


@attrs.define
class HostNetworks:
    """The test's namespace with its bridge, and one namespace per host on it."""

    test: NetworkNamespace
    hosts: dict[int, NetworkNamespace]
    addresses: dict[int, str]

    def cut_off(self, node_id: int) -> None:
        self.test.ip("link", "set", _link(node_id), "down")

    def heal(self, node_id: int) -> None:
        self.test.ip("link", "set", _link(node_id), "up")


def _link(node_id: int) -> str:
    return f"host{node_id}"


@contextmanager
def host_networks(node_ids: Mapping[int, str]) -> Iterator[HostNetworks]:
    """The namespaces for hosts `node_id -> last octet`, closed afterwards (the veth
    pairs and the bridge go with them)."""
    with ExitStack() as stack:
        test = NetworkNamespace.create()
        stack.callback(test.close)
        test.ip("link", "add", "bridge0", "type", "bridge")
        test.ip("address", "add", f"{BRIDGE_ADDRESS}/{PREFIX_LENGTH}", "dev", "bridge0")
        test.ip("link", "set", "bridge0", "up")
        networks = HostNetworks(test, {}, {})
        for node_id, octet in node_ids.items():
            host = NetworkNamespace.create()
            stack.callback(host.close)
            link = _link(node_id)
            test.ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", host.path)
            test.ip("link", "set", link, "master", "bridge0", "up")
            address = f"198.18.0.{octet}"
            host.ip("address", "add", f"{address}/{PREFIX_LENGTH}", "dev", "eth0")
            host.ip("link", "set", "eth0", "up")
            networks.hosts[node_id] = host
            networks.addresses[node_id] = address
        yield networks
