"""A class the process has not imported is found by the module its run recorded."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner

from actorflow import AdoptionPolicy, Orchestrator, Runtime
from actorflow.cli import EXIT_CODES, app
from actorflow.errors import RegistryError, RunPaused
from actorflow.runtime import lookup
from actorflow.runtime.actors import module_of
from actorflow.storage import FileStore, RunStatus

if TYPE_CHECKING:
    from pathlib import Path

FLOWS = """
    from actorflow import Orchestrator, Request, RunContext, Specialist, handler


    class Greeting(Request[str], frozen=True):
        name: str


    class Flow(Orchestrator):
        __actorflow_name__ = "{pkg}.Flow"  # each test's own: no other test defined it

        async def run(self, ctx: RunContext, name: str) -> str:
            from {pkg}.agents import Greeter  # imported only as the run goes on

            greeter = await ctx.spawn(Greeter, name="greeter")
            hello = await ctx.ask(greeter, Greeting(name))
            answer = await ctx.wait_for_input("go on?")
            return f"{{hello}} {{answer}}"
"""

AGENTS = """
    from actorflow import Specialist, handler
    from {pkg}.flows import Greeting


    class Greeter(Specialist):
        __actorflow_name__ = "{pkg}.Greeter"

        @handler
        async def greet(self, greeting: Greeting) -> str:
            return "hello " + greeting.name
"""

START = """
import sys
import anyio
from actorflow import Runtime
from actorflow.errors import RunPaused
from {pkg}.flows import Flow

async def main() -> None:
    async with Runtime(store=sys.argv[1]) as runtime:
        try:
            await runtime.run(Flow, "ann", run_id="paused")
        except RunPaused:
            pass
        await runtime.submit(Flow, "bob", run_id="queued")

anyio.run(main)
"""


def _package(root: Path) -> str:
    """A package of its own per test, so that no earlier test has imported it."""
    pkg = f"afmod_{uuid.uuid4().hex[:12]}"
    (root / pkg).mkdir()
    (root / pkg / "__init__.py").write_text("")
    (root / pkg / "flows.py").write_text(textwrap.dedent(FLOWS.format(pkg=pkg)))
    (root / pkg / "agents.py").write_text(textwrap.dedent(AGENTS.format(pkg=pkg)))
    return pkg


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    code = tmp_path / "code"
    code.mkdir()
    pkg = _package(code)
    monkeypatch.syspath_prepend(str(code))  # importable here, as an installed package is
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), *sys.path])}
    subprocess.run(
        [sys.executable, "-c", START.format(pkg=pkg), str(tmp_path / "store")],
        check=True,
        timeout=120,
        env=env,
    )
    assert pkg not in sys.modules
    return pkg


async def test_a_paused_run_of_a_module_not_imported_here_resumes(
    package: str, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "store")
    manifest = await store.read_run("paused")
    assert (manifest.status, manifest.workflow_module) == (RunStatus.PAUSED, f"{package}.flows")
    async with Runtime(store=store) as runtime:
        # its workflow class, then its agent's, imported from the modules the run recorded
        assert await runtime.resume("paused", "yes") == "hello ann yes"
    assert f"{package}.agents" in sys.modules


async def test_a_run_of_a_module_not_imported_here_forks(package: str, tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store")
    latest = (await store.list_snapshots("paused"))[-1].snapshot_id
    async with Runtime(store=store) as runtime:
        handle = await runtime.fork("paused", latest, new_run_id="forked")
        with pytest.raises(RunPaused):
            await handle.result()
        assert await runtime.resume("forked", "no") == "hello ann no"


async def test_a_queued_run_of_a_module_not_imported_here_is_recovered(
    package: str, tmp_path: Path
) -> None:
    async with Runtime(store=tmp_path / "store") as runtime:
        assert await runtime.recover() == {}, "the queued run starts, then pauses"
        assert (await runtime.store.read_run("queued")).status is RunStatus.PAUSED


async def test_a_queued_run_of_a_module_not_imported_here_is_adopted(
    package: str, tmp_path: Path
) -> None:
    policy = AdoptionPolicy(poll_interval=0.01)
    async with (
        Runtime(store=tmp_path / "store") as observer,
        Runtime(store=tmp_path / "store", adopt_orphans=policy),
    ):
        handle = await observer.follow("queued")
        with anyio.fail_after(60), pytest.raises(RunPaused):
            await handle.result()


def test_a_recorded_module_is_imported_only_if_plain_and_not_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = _package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("__main__", f"{pkg}.__main__", "os; print(1)", "../etc", ".relative"):
        with pytest.raises(RegistryError, match="not one actorflow imports"):
            lookup(f"{pkg}.Flow", module)
    with pytest.raises(RegistryError, match="could not be imported"):
        lookup("Nothing", f"{pkg}.missing")
    with pytest.raises(RegistryError, match="no class with this name"):
        lookup("Nothing", f"{pkg}.flows")  # imported, but it defines no such class
    flow = lookup(f"{pkg}.Flow", f"{pkg}.flows")
    assert issubclass(flow, Orchestrator)
    assert module_of(flow) == f"{pkg}.flows"
    assert module_of(type("Script", (), {"__module__": "__main__"})) is None


def test_the_cli_resumes_and_recovers_such_runs_without_app(package: str, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    resumed = CliRunner().invoke(app, ["resume", "paused", "--response", "yes", "--store", store])
    assert resumed.exit_code == 0, resumed.output
    assert "hello ann yes" in resumed.output
    recovered = CliRunner().invoke(app, ["recover", "queued", "--store", store])
    assert recovered.exit_code == EXIT_CODES["paused"], recovered.output
    assert "RegistryError" not in recovered.output
