"""The docs keep up with the code: every public name is in the API reference, examples run."""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

import actorflow.testing
from actorflow import Orchestrator, Request, RunContext, Specialist, handler
from actorflow.testing import CrashOutcome, crash_and_recover
from tests.snippets import python_blocks

DOCS = Path(__file__).resolve().parent.parent / "docs"
PUBLIC = (
    "actorflow",
    "actorflow.runtime",
    "actorflow.runtime.cluster",
    "actorflow.runtime.registry",
    "actorflow.runtime.reading",
    "actorflow.runtime.replaying",
    "actorflow.agents",
    "actorflow.storage",
    "actorflow.errors",
    "actorflow.testing",
    "actorflow.testing.conformance",
    "actorflow.cli.progress",
)


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_public_name_is_in_the_api_reference(module_name: str) -> None:
    api = (DOCS / "api.md").read_text()
    module = importlib.import_module(module_name)
    missing = [n for n in module.__all__ if f"`{n}`" not in api]
    assert not missing, f"run `python docs/_gen_api.py`: {module_name} names missing: {missing}"


def test_the_docs_link_to_pages_that_exist() -> None:
    for page in [*DOCS.glob("*.md"), DOCS.parent / "README.md"]:
        for target in re.findall(r"\]\(((?:docs/)?[a-z_]+\.md)(?:#[^)]*)?\)", page.read_text()):
            path = DOCS / target if page.parent == DOCS else DOCS.parent / target
            assert path.exists(), f"{page.name} links to {target}, which does not exist"


class Draft(Request[int], frozen=True):
    text: str


class Published(msgspec.Struct):
    count: int = 0


class Publisher(Specialist):
    __actorflow_name__ = "tests.docs.Publisher"
    state: Published

    @handler
    async def publish(self, draft: Draft) -> int:
        self.state.count += 1
        return self.state.count


class MyWorkflow(Orchestrator):
    """The workflow the recovery page's crash loop tests: work, a pause, more work."""

    __actorflow_name__ = "tests.docs.MyWorkflow"

    async def run(self, ctx: RunContext, text: str) -> str:
        publisher = await ctx.spawn(Publisher, name="publisher")
        await ctx.ask(publisher, Draft(text))
        answer = await ctx.wait_for_input("Publish the draft?")
        count = await ctx.ask(publisher, Draft(answer))
        return f"{text}:{answer}:{count}"


def _docstring_block(module: object) -> str:
    """The code block (after ``::``) of a module's docstring."""
    doc = inspect.getdoc(module) or ""
    block = doc.split("::\n", 1)[1].split("\n\n\n\n", 1)[0]
    indented = re.match(r"((?:\n|    .*\n)+)", block + "\n")
    assert indented is not None
    return textwrap.dedent(indented.group(1))


@pytest.mark.parametrize("where", ["docs/recovery.md", "actorflow.testing"])
async def test_the_crash_loop_the_docs_show_runs_and_tries_every_point(where: str) -> None:
    if where == "actorflow.testing":
        code = _docstring_block(actorflow.testing)
    else:
        (code,) = python_blocks("recovery.md", "## Testing your workflow's recovery")
    namespace: dict[str, Any] = {"MyWorkflow": MyWorkflow, "my_input": "draft"}
    exec(compile(code, where, "exec"), namespace)
    outcomes: list[CrashOutcome] = []

    async def counted(*args: Any, **kwargs: Any) -> CrashOutcome:
        outcomes.append(await crash_and_recover(*args, **kwargs))
        return outcomes[-1]

    namespace["crash_and_recover"] = counted  # the loop looks it up as it runs
    await namespace["test_survives_a_crash_anywhere"]()
    assert [o.crashed for o in outcomes] == [True] * (len(outcomes) - 1) + [False]
    assert len(outcomes) > 5, "the loop crashes the run before, during and after its pause"
    assert outcomes[-1].recovered == "draft:yes:2"
