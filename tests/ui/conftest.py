"""A file store made by real runs on asyncio and on trio, and an inspector over it."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import anyio
import msgspec
import pytest

from actorflow import Runtime
from actorflow.storage import FileStore, RunManifest, RunStatus
from actorflow.testing import crash_and_recover
from tests.ui.flows import BIG, HOSTILE, Team


def _missing() -> str | None:
    """What the inspector's tests need and this environment lacks, or None."""
    for module, extra in (("starlette", "ui"), ("jinja2", "ui"), ("httpx", "dev")):
        try:
            importlib.import_module(module)
        except ImportError:
            return f"{module} is not installed (the {extra} extra has it)"
    return None


MISSING = _missing()
if MISSING is not None:  # a skip here would be a collection error: leave the tests out, say why
    collect_ignore_glob = ["test_*.py"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say why the inspector's tests were left out, if they were."""
    if MISSING is not None:
        terminalreporter.write_line(f"actorflow ui tests not collected: {MISSING}", yellow=True)


RUNS = {
    "team-asyncio": ("asyncio", [HOSTILE, "beta"]),
    "team-trio": ("trio", ["alpha", "beta", "gamma"]),
    "team-big": ("asyncio", [BIG, "small"]),
}
"""Run id -> the loop it ran on and its input."""

CRASHED = "team-crashed"
"""A run whose first attempt crashed after a few records and a recovery finished it."""

HOSTILE_MANIFEST = "hostile-manifest"
"""A run whose stored workflow name and prompt are hostile (written as a damaged store might)."""


async def _make_runs(path: str, backend: str) -> None:
    async with Runtime(store=FileStore(path)) as runtime:
        for run_id, (loop, topics) in RUNS.items():
            if loop == backend:
                await runtime.run(Team, topics, run_id=run_id)
    if backend == "trio":
        outcome = await crash_and_recover(
            Team, ["delta", "epsilon"], crash_after=3, store=FileStore(path), run_id=CRASHED
        )
        assert outcome.crashed
        assert outcome.recovered == outcome.expected


async def _hostile_entries(path: str) -> None:
    store = FileStore(path)
    try:
        await store.create_run(
            RunManifest(
                run_id=HOSTILE_MANIFEST,
                workflow=HOSTILE,
                input=msgspec.msgpack.encode(HOSTILE),
                input_hash="h",
                status=RunStatus.PAUSED,
                prompt=HOSTILE,
                code_version=HOSTILE,
                created=1_700_000_000.0,
                updated=1_700_000_100.0,
            )
        )
    finally:
        await store.aclose()
    runs = Path(path, "runs")
    # a folder whose name is no run id and not even UTF-8, as a damaged disk may hold
    os.mkdir(os.path.join(os.fsencode(runs), b"bad-\xff\xfe-<script>"))


def make_store(path: str) -> str:
    """A file store at ``path`` with the runs of :data:`RUNS` and hostile entries."""
    anyio.run(_make_runs, path, "asyncio")
    anyio.run(_make_runs, path, "trio", backend="trio")
    anyio.run(_hostile_entries, path)
    return path


@pytest.fixture(scope="session")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_store(str(tmp_path_factory.mktemp("ui") / "store"))
