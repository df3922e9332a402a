"""A store this process may read but not write: readers work, writers say so by name."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.storage import FileStore
from tests.cli.stored import populate
from tests.runtime.workflow.ledger_flow import RUN, interrupted_run

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

runner = CliRunner()
LEDGER_APP = "tests.runtime.workflow.ledger_flow:make_runtime"


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[str]:
    """``path`` as this process sees a read-only store: its mode, or a read-only mount for root."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
        for p in modes:
            p.chmod(modes[p] & ~0o222)
        try:
            yield str(path)
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    # root writes whatever the modes say: only a read-only mount stops it
    view = path.with_name(path.name + "-ro")
    view.mkdir()
    mount = shutil.which("mount")
    done = mount and subprocess.run(
        [mount, "--bind", "-o", "ro", str(path), str(view)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if not done or done.returncode != 0:
        pytest.skip("running as root, and this machine cannot mount a read-only view")
    try:
        yield str(view)
    finally:
        subprocess.run(["umount", str(view)], capture_output=True, timeout=30, check=True)


def test_runs_and_the_other_readers_need_no_write_access(tmp_path: Path) -> None:
    store = tmp_path / "store"
    anyio.run(populate, str(store))
    with read_only(store) as view:
        result = cli("runs", "--store", view, "--json")
        assert result.exit_code == EXIT_CODES["ok"], result.output
        rows = json.loads(result.stdout)
        assert {r["run_id"]: r["alive"] for r in rows} == {"run-a": False, "run-b": False}
        readers = (["show", "run-b", "live"], ["checkpoints", "run-a"], ["validate"])
        for args in (*readers, ["compare", "run-a", "run-b"]):
            result = cli(*args, "--store", view)
            assert result.exit_code == EXIT_CODES["ok"], result.output


def test_recover_on_a_read_only_store_is_a_named_error_not_a_failed_run(tmp_path: Path) -> None:
    async def interrupt() -> None:
        async with FileStore(tmp_path / "store") as store:
            await interrupted_run(store, RUN)

    anyio.run(interrupt)
    with read_only(tmp_path / "store") as view:
        result = cli("recover", "--app", LEDGER_APP, "--store", view)
    assert result.exit_code == EXIT_CODES["error"], result.output
    assert result.output.startswith("error: ")
    assert "read-only" in result.output
    assert "write access" in result.output


def test_prune_on_a_read_only_store_is_the_same_named_error(tmp_path: Path) -> None:
    store = tmp_path / "store"
    anyio.run(populate, str(store))
    with read_only(store) as view:
        result = cli("prune", "--store", view)
    assert result.exit_code == EXIT_CODES["error"], result.output
    assert "read-only to this process" in result.output
