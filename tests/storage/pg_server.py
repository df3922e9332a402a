"""A real PostgreSQL server for the PostgreSQL store's tests (a pytest plugin).

``pg_server``: Debian's ``postgresql`` package (``initdb`` and ``postgres``
from ``/usr/lib/postgresql/<version>/bin``), session-scoped, started lazily
on 127.0.0.1 on a free port with a temporary data folder, stopped (and the
folder removed) at the end of the session. ``initdb`` refuses to run as
root, so as root the server runs as the ``postgres`` user. Tests using it
are skipped, saying why, only when PostgreSQL is not installed (``.ci/run``
installs it).

The server trusts local connections and runs with ``fsync=off``: the tests
check what the store does, not the disk (the benchmark's server syncs).
Each test takes a schema of its own (:meth:`PgServer.schema`).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.storage.s3_servers import _free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

    from actorflow.storage.postgres import PostgresStore

_START_DEADLINE = 60.0  # a generous bound on startup; not a timing assertion
_names = itertools.count()


def pg_bindir() -> Path | None:
    """The folder of ``initdb`` and ``postgres``, newest version first; None if absent."""
    for found in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(found) / "initdb").exists() and (Path(found) / "postgres").exists():
            return Path(found)
    initdb = shutil.which("initdb")
    return Path(os.path.realpath(initdb)).parent if initdb else None


def _as_owner(args: list[str]) -> list[str]:
    """``args`` run as the ``postgres`` user when this process is root."""
    if os.geteuid() != 0:
        return args
    return ["runuser", "-u", "postgres", "--", *args]


@dataclass
class PgServer:
    """One PostgreSQL server process the tests talk to."""

    bindir: Path
    root: Path
    port: int = 0
    extra: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def dsn(self, dbname: str = "postgres") -> str:
        """A URL for database ``dbname`` as the superuser ``postgres``."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def schema(self) -> str:
        """A schema name no test used before in this session."""
        return f"t{os.getpid()}_{next(_names)}"

    def init(self) -> None:
        """Create the data folder (``initdb``), owned by the server's user."""
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        subprocess.run(
            _as_owner(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=_START_DEADLINE,
        )

    def start(self) -> None:
        """Start the server on a free port and wait (bounded) until it accepts connections."""
        self.port = self.port or _free_port()
        log = self.root / "postgres.log"
        args = [
            str(self.bindir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-k",
            str(self.root),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "max_connections=400",
            *self.extra,
        ]
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                _as_owner(args), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + _START_DEADLINE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited at start; see {log}")
            ready = subprocess.run(
                [str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
                timeout=10,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.05)  # polling a server's startup, bounded by the deadline
        self.stop()
        raise RuntimeError(f"postgres did not start in {_START_DEADLINE} s; see {log}")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server (fast shutdown; SIGKILL with ``kill``)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        postmaster = self._postmaster_pid()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        deadline = time.monotonic() + _START_DEADLINE
        # the server's own process (not this one's child when run through runuser) must be
        # gone before the data folder can be started again
        while postmaster is not None and Path(f"/proc/{postmaster}").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres {postmaster} did not exit")
            time.sleep(0.01)

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def sql(self, statement: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        """Run one statement as the superuser (psycopg, autocommit); its rows."""
        import psycopg

        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            cur = conn.execute(statement)
            return list(cur.fetchall()) if cur.description else []


@contextlib.contextmanager
def running_server(extra: list[str] | None = None) -> Iterator[PgServer]:
    """A fresh server in a temporary folder, stopped and removed on leaving.

    Raises:
        pytest.skip.Exception: PostgreSQL or psycopg is not installed.
    """
    pytest.importorskip(
        "psycopg", reason="psycopg is not installed: pip install 'actorflow[postgres]'"
    )
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    # not under pytest's tmp folder: the postgres user must be able to reach it
    root = Path(tempfile.mkdtemp(prefix="actorflow-pg-"))
    server = PgServer(bindir, root, extra=list(extra or ()))
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole session (``fsync=off``)."""
    with running_server(["-c", "fsync=off", "-c", "full_page_writes=off"]) as server:
        yield server


def open_pg_store(server: PgServer, schema: str, **options: Any) -> PostgresStore:
    """A PostgresStore on the server, in ``schema`` (imported here: psycopg is optional)."""
    from actorflow.storage.postgres import PostgresStore

    return PostgresStore(server.dsn(), schema=schema, **options)


def pg_url(server: PgServer, schema: str) -> str:
    """The ``--store`` URL of ``schema`` on the server (what ``open_store`` takes)."""
    return f"{server.dsn()}?schema={schema}"
