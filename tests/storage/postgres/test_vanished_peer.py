"""A claimer whose machine vanishes (no FIN, no RST): the server frees its claims in seconds.

A killed process's connection is closed by its kernel, and the server frees
its advisory locks at once; a machine that loses power or its network says
nothing, and the server would hold its locks (its runs) until its own TCP
keepalive gave up: two hours by default. The claimer here runs in a network
namespace of its own, wired to the server by a veth pair; taking its address
away makes it vanish. Needs root and ``ip netns`` (skipped otherwise, saying why).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.lines import Lines
from tests.storage.pg_server import PgServer, pg_bindir

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[3]
DEADLINE = 60.0
"""A bound on the server noticing the vanished peer (it takes about ten seconds)."""


def _ip(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ip", *args], capture_output=True, timeout=30, check=False)


def _at(net: str, host: int) -> str:
    """Address ``host`` of the /30 whose first address is ``net``."""
    *head, last = net.split(".")
    return ".".join([*head, str(int(last) + host)])


@contextlib.contextmanager
def _namespace() -> Iterator[tuple[str, str, list[str]]]:
    """A network namespace wired to this one: its name, our address, and the ``ip``
    arguments that take its address away."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns) to make a peer vanish")
    tag = f"{os.getpid() % 100_000}"
    name, ours, theirs = f"afpg{tag}", f"afv{tag}a", f"afv{tag}b"
    slot = os.getpid() % 16_000  # a /30 of 10.213.0.0/16 of this process's own
    net = f"10.213.{slot // 64}.{slot % 64 * 4}"
    made = _ip("netns", "add", name)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.decode().strip()}")
    try:
        steps = [
            ["link", "add", ours, "type", "veth", "peer", "name", theirs],
            ["link", "set", theirs, "netns", name],
            ["addr", "add", f"{_at(net, 1)}/30", "dev", ours],
            ["link", "set", ours, "up"],
            ["netns", "exec", name, "ip", "addr", "add", f"{_at(net, 2)}/30", "dev", theirs],
            ["netns", "exec", name, "ip", "link", "set", theirs, "up"],
        ]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"cannot wire a namespace (ip {' '.join(step)}): {done.stderr!r}")
        vanish = ["netns", "exec", name, "ip", "addr", "del", f"{_at(net, 2)}/30", "dev", theirs]
        yield name, _at(net, 1), vanish
    finally:
        _ip("netns", "del", name)  # takes its end of the veth pair, and so ours
        _ip("link", "del", ours)


@pytest.fixture
def vanishing() -> Iterator[tuple[PgServer, str, str, list[str]]]:
    """A server that also listens on the namespace's wire: the server, the namespace, the
    server's address there, and the ``ip`` arguments that make the namespace vanish."""
    pytest.importorskip("psycopg")
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed")
    with _namespace() as (name, ours, vanish):
        root = Path(tempfile.mkdtemp(prefix="actorflow-pg-"))
        extra = ["-c", f"listen_addresses=127.0.0.1,{ours}", "-c", "fsync=off"]
        server = PgServer(bindir, root, extra=extra)
        try:
            server.init()
            with (server.data_dir / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {ours}/30 trust\n")
            server.start()
            yield server, name, ours, vanish
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)


def test_a_vanished_claimers_runs_are_free_in_seconds(
    vanishing: tuple[PgServer, str, str, list[str]],
) -> None:
    from actorflow.storage.postgres import PostgresStore

    server, namespace, address, vanish = vanishing
    remote = f"postgresql://postgres@{address}:{server.port}/postgres?schema=held"
    claimer = [sys.executable, "-m", "tests.storage.postgres.claim_child", remote, "run-1"]
    child = subprocess.Popen(
        ["ip", "netns", "exec", namespace, *claimer],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    try:
        assert Lines(child.stdout).next(timeout=DEADLINE) == "claimed"

        async def freed() -> None:
            store = PostgresStore(server.dsn(), schema="held")
            try:
                assert (await store.read_claim("run-1")).alive
                # the claimer's machine is gone: nothing it sent or would send arrives
                gone = _ip(*vanish)
                assert gone.returncode == 0, gone.stderr
                with anyio.fail_after(DEADLINE):
                    while True:
                        if not (await store.read_claim("run-1")).alive:
                            break
                        await anyio.sleep(0.5)  # the server's keepalive: no event to wait on
                await store.claim("run-1", "taker:2:b")
            finally:
                await store.aclose()

        anyio.run(freed)
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
