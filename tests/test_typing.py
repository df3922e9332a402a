"""What a type checker tells users: mypy --strict on small pieces of user code.

Each case group is one mypy run on a file written to a temporary folder,
importing actorflow from this checkout (``MYPYPATH``), sharing one mypy cache
per test session so that only the first run pays for analysing actorflow.

Choices the tests pin down:

- ``await ctx.ask(ref, msg)`` and ``await ref.ask(msg)`` with ``msg`` a
  ``Request[R]`` are ``R``; assigning them to another type is an error (no
  catch-all overload may swallow it). A message that is not a ``Request`` is
  still accepted; its reply is ``object``, to narrow before use (an ``Any``
  there would be the catch-all that lets a wrong assignment through).
- ``await ctx.spawn(Cls, name=...)`` is ``ActorRef[Cls]``.
- ``await ctx.gather(a, b)`` is ``list[A | B]`` for two to four awaitables
  given one by one, and ``list[T]`` with ``*many``: gather returns a list at
  run time, so the checker is told a list (a tuple type would let
  ``results + (x,)`` pass and fail when run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MYPY_TIMEOUT = 120.0
"""Longest one mypy run may take, in seconds (a cold cache takes a few)."""


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def run_mypy(folder: Path, name: str, source: str, cache: Path) -> list[str]:
    """mypy --strict on ``source`` saved as ``folder/name``; its output lines."""
    path = folder / name
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    env["MYPYPATH"] = str(ROOT)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-version",
            "3.11",
            "--show-error-codes",
            "--no-color-output",
            "--no-pretty",
            "--hide-error-context",
            "--cache-dir",
            str(cache),
            name,
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=MYPY_TIMEOUT,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def marked_lines(source: str, mark: str) -> dict[int, str]:
    """Line numbers (1-based) of the lines ending with ``# <mark>...``, with the mark's text."""
    found = {}
    for number, line in enumerate(source.splitlines(), 1):
        m = re.search(rf"  #\s*{mark}\s*(.*)$", line)
        if m:
            found[number] = m.group(1).strip()
    return found


def readme_workflow() -> str:
    """The code block of the README's section "A workflow"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## A workflow", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the README's 'A workflow' section has no python block"
    return block.group(1)


def test_the_readmes_workflow_example_passes_mypy_strict(tmp_path: Path, mypy_cache: Path) -> None:
    out = run_mypy(tmp_path, "readme_workflow.py", readme_workflow(), mypy_cache)
    errors = [line for line in out if ": error:" in line]
    assert not errors, "the README's example fails mypy --strict:\n" + "\n".join(out)
    assert any(line.startswith("Success") for line in out), "\n".join(out)


REVEALS = """\
from __future__ import annotations

import msgspec

from actorflow import Orchestrator, Request, RunContext, Specialist, handler, phase


class Finding(msgspec.Struct, frozen=True):
    answer: str


class Plan(msgspec.Struct, frozen=True):
    steps: list[str]


class Question(Request[Finding], frozen=True):
    text: str


class Draft(Request[Plan], frozen=True):
    goal: str


class Count(Request[int], frozen=True):
    pass


class Worker(Specialist):
    @handler
    async def answer(self, q: Question) -> Finding:
        return Finding(q.text)

    @handler
    async def draft(self, d: Draft) -> Plan:
        return Plan([d.goal])

    @handler
    async def count(self, c: Count) -> int:
        return 1


class A(msgspec.Struct, frozen=True):
    a: int


class B(msgspec.Struct, frozen=True):
    b: str


class Flow(Orchestrator):
    @phase
    async def step_a(self, ctx: RunContext) -> A:
        return A(1)

    @phase
    async def step_b(self, ctx: RunContext) -> B:
        return B("b")

    async def run(self, c: RunContext, goal: str) -> None:
        ref = await c.spawn(Worker, name="w")
        reveal_type(ref)  # R1
        reveal_type(await c.ask(ref, Question("q")))  # R2
        reveal_type(await c.ask(ref, Draft(goal)))  # R3
        reveal_type(await ref.ask(Question("q")))  # R4
        reveal_type(await ref.ask(Count()))  # R5
        reveal_type(await self.step_a(c))  # R6
        reveal_type(await c.gather(self.step_a(c), self.step_b(c)))  # R7
        reveal_type(await c.gather(c.ask(ref, Question("a")), c.ask(ref, Draft("b"))))  # R8
        reveal_type(await c.gather(self.step_a(c), c.ask(ref, Count()), c.now()))  # R9
        reveal_type(await c.gather(self.step_a(c), self.step_b(c), c.uuid(), c.random()))  # R10
        reveal_type(await c.gather(*[c.ask(ref, Question(q)) for q in goal.split()]))  # R11
        a, b = await c.gather(self.step_a(c), self.step_b(c))
        reveal_type(b)  # R12
"""


EXPECTED_REVEALS = {
    # await ctx.spawn(Cls, name=...) is ActorRef[Cls] (wherever ActorRef is defined)
    "R1": r"actorflow\.[\w.]*ActorRef\[reveals\.Worker\]",
    # await ctx.ask / ref.ask with a Request[R] is R; a phase is its return type
    "R2": r"reveals\.Finding",
    "R3": r"reveals\.Plan",
    "R4": r"reveals\.Finding",
    "R5": r"(builtins\.)?int",
    "R6": r"reveals\.A",
    # gather of 2, 3 and 4 awaitables: a list of the union of their types
    "R7": r"(builtins\.)?list\[reveals\.A \| reveals\.B\]",
    "R8": r"(builtins\.)?list\[reveals\.Finding \| reveals\.Plan\]",
    "R9": r"(builtins\.)?list\[reveals\.A \| (builtins\.)?int \| (builtins\.)?float\]",
    "R10": (
        r"(builtins\.)?list\[reveals\.A \| reveals\.B \| (builtins\.)?str \| "
        r"(builtins\.)?float\]"
    ),
    # gather of *many: a list of their one type
    "R11": r"(builtins\.)?list\[reveals\.Finding\]",
    "R12": r"reveals\.A \| reveals\.B",
}


def test_asks_spawns_and_gathers_reveal_precise_types(tmp_path: Path, mypy_cache: Path) -> None:
    out = run_mypy(tmp_path, "reveals.py", REVEALS, mypy_cache)
    revealed: dict[int, str] = {}
    for line in out:
        m = re.match(r"reveals\.py:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            revealed[int(m.group(1))] = m.group(2)
    marks = {mark: n for n, mark in marked_lines(REVEALS, "").items()}
    assert set(marks) == set(EXPECTED_REVEALS), "every reveal has its expectation"
    source = REVEALS.splitlines()
    wrong = []
    for mark, pattern in EXPECTED_REVEALS.items():
        number = marks[mark]
        got = revealed.get(number)
        if got is None or not re.fullmatch(pattern, got):
            code = source[number - 1].split("#")[0].strip()
            wrong.append(f"line {number}: {code}\n    expected {pattern!r}, revealed {got!r}")
    assert not wrong, "mypy reveals other types:\n" + "\n".join(wrong)
    errors = [line for line in out if ": error:" in line]
    assert not errors, "the snippet has type errors:\n" + "\n".join(errors)


WRONG = """\
from __future__ import annotations

import msgspec

from actorflow import ActorRef, Request, RunContext, Specialist, handler


class Finding(msgspec.Struct, frozen=True):
    answer: str


class Plan(msgspec.Struct, frozen=True):
    steps: list[str]


class Unrelated(msgspec.Struct, frozen=True):
    x: int


class SubQuestion(Request[Finding], frozen=True):
    text: str


class NotAMessage(Request[Unrelated], frozen=True):
    pass


class Worker(Specialist):
    @handler
    async def answer(self, q: SubQuestion) -> Finding:
        return Finding(q.text)


async def user_code(ctx: RunContext, ref: ActorRef[Worker]) -> None:
    finding: Finding = await ref.ask(SubQuestion("q"))  # fine
    also: Finding = await ctx.ask(ref, SubQuestion("q"))  # fine
    p: Plan = await ref.ask(SubQuestion("q"))  # E: a Request[Finding] gives no Plan
    p2: Plan = await ctx.ask(ref, SubQuestion("q"))  # E: the same through the run context
    p3: Plan = await ref.ask(NotAMessage())  # E: its reply is an Unrelated
    p4: Plan = await ctx.ask(ref, NotAMessage())  # E: the same through the run context
    print(finding, also, p, p2, p3, p4)
"""


def test_an_ask_whose_reply_type_does_not_fit_is_a_mypy_error(
    tmp_path: Path, mypy_cache: Path
) -> None:
    out = run_mypy(tmp_path, "wrong.py", WRONG, mypy_cache)
    errors: dict[int, list[str]] = {}
    for line in out:
        m = re.match(r"wrong\.py:(\d+): error: (.*)$", line)
        if m:
            errors.setdefault(int(m.group(1)), []).append(m.group(2))
    expected = marked_lines(WRONG, "E:")
    source = WRONG.splitlines()
    missing = [
        f"line {n}: {source[n - 1].split('#')[0].strip()}  ({why})"
        for n, why in expected.items()
        if n not in errors
    ]
    unexpected = [f"line {n}: {msgs}" for n, msgs in errors.items() if n not in expected]
    assert not missing, (
        "mypy accepts asks whose reply does not fit (a catch-all overload?):\n"
        + "\n".join(missing)
        + "\nmypy said:\n"
        + "\n".join(out)
    )
    assert not unexpected, "errors on lines that are fine:\n" + "\n".join(unexpected)


RUN_REVEALS = """\
from __future__ import annotations

import msgspec

from actorflow import Orchestrator, RunContext, Runtime


class Report(msgspec.Struct, frozen=True):
    text: str


class Writes(Orchestrator):
    async def run(self, ctx: RunContext, topic: str) -> Report:
        return Report(topic)


class Counts(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> list[int]:
        return [1]


async def user_code(runtime: Runtime, any_workflow: type[Orchestrator]) -> None:
    reveal_type(await runtime.run(Writes, "x"))  # RR1
    handle = await runtime.start(Counts)
    reveal_type(handle)  # RR2
    reveal_type(await handle.result())  # RR3
    reveal_type(await runtime.run(any_workflow))  # RR4
    wrong: int = await runtime.run(Writes, "x")  # E: a Report is no int
    print(wrong)
"""

EXPECTED_RUN_REVEALS = {
    "RR1": r"run_reveals\.Report",
    "RR2": r"actorflow\.[\w.]*RunHandle\[(builtins\.)?list\[(builtins\.)?int\]\]",
    "RR3": r"(builtins\.)?list\[(builtins\.)?int\]",
    "RR4": r"Any",  # the base class's run returns Any: nothing more is known
}


def test_runs_and_handles_reveal_the_workflows_result_type(
    tmp_path: Path, mypy_cache: Path
) -> None:
    out = run_mypy(tmp_path, "run_reveals.py", RUN_REVEALS, mypy_cache)
    revealed: dict[int, str] = {}
    errors: dict[int, str] = {}
    for line in out:
        m = re.match(r"run_reveals\.py:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            revealed[int(m.group(1))] = m.group(2)
        m = re.match(r"run_reveals\.py:(\d+): error: (.*)$", line)
        if m:
            errors[int(m.group(1))] = m.group(2)
    marks = {mark: n for n, mark in marked_lines(RUN_REVEALS, "").items() if mark.startswith("RR")}
    assert set(marks) == set(EXPECTED_RUN_REVEALS), "every reveal has its expectation"
    wrong = [
        f"{mark}: expected {pattern!r}, revealed {revealed.get(marks[mark])!r}"
        for mark, pattern in EXPECTED_RUN_REVEALS.items()
        if not re.fullmatch(pattern, revealed.get(marks[mark], ""))
    ]
    assert not wrong, "mypy reveals other types:\n" + "\n".join(wrong)
    assert set(errors) == set(marked_lines(RUN_REVEALS, "E:")), "\n".join(out)
