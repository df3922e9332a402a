"""What a type checker sees of refs: ``ask`` of a ``Request[R]`` is an ``R``, refs are agents.

Each snippet runs through ``mypy --strict`` (the project's configuration) in
a subprocess. A line ending in ``# reveal: T`` must reveal ``T``; a line
ending in ``# error: code`` must be that error; no other line may be one.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

PRELUDE = """\
from __future__ import annotations

import msgspec

from actorflow import Actor, ActorRef, Request, handler
from actorflow.runtime.actors import AgentRef, AgentReply


class Finding(msgspec.Struct):
    text: str


class Plan(msgspec.Struct):
    steps: list[str]


class SubQuestion(Request[Finding], frozen=True):
    q: str


class Plain(msgspec.Struct, frozen=True):
    n: int


class Researcher(Actor):
    @handler
    async def sub(self, msg: SubQuestion) -> Finding:
        return Finding(msg.q)

    @handler
    async def plain(self, msg: Plain) -> int:
        return msg.n
"""

ASK_REQUEST = """
async def main(ref: ActorRef[Researcher]) -> None:
    finding = await ref.ask(SubQuestion("q"))
    reveal_type(finding)  # reveal: snippet.Finding
    plan: Plan = await ref.ask(SubQuestion("q"))  # error: assignment
    text: str = (await ref.ask(SubQuestion("q"), timeout=1.0)).text
"""

ASK_PLAIN = """
async def main(ref: ActorRef[Researcher]) -> int:
    reply = await ref.ask(Plain(1))
    reveal_type(reply)  # reveal: object
    assert await ref.ask(Plain(1)) == 1
    n: int = await ref.ask(Plain(1))  # error: assignment
    if isinstance(reply, int):
        return reply
    return 0
"""

REF_IS_AN_AGENT = """
async def main(ref: ActorRef[Researcher]) -> None:
    agent: AgentRef = ref
    reveal_type(ref.actor_type)  # reveal: type[snippet.Researcher]
    reply = await agent.deliver(SubQuestion("q"), None)
    reveal_type(reply)  # reveal: actorflow.runtime.actors._protocol.AgentReply
    local: AgentReply = await ref.deliver(Plain(1), {"step": "1"})
    state: bytes = local.state
"""


def _expectations(source: str) -> tuple[dict[int, str], dict[int, str]]:
    reveals: dict[int, str] = {}
    errors: dict[int, str] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        if (found := re.search(r"# reveal: (.+)$", line)) is not None:
            reveals[number] = found.group(1)
        if (found := re.search(r"# error: (\S+)$", line)) is not None:
            errors[number] = found.group(1)
    return reveals, errors


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(ASK_REQUEST, id="ask-a-request"),
        pytest.param(ASK_PLAIN, id="ask-a-plain-message"),
        pytest.param(REF_IS_AN_AGENT, id="ref-is-an-agent"),
    ],
)
def test_mypy_sees_what_the_snippet_says(tmp_path: Path, body: str) -> None:
    source = PRELUDE + body
    path = tmp_path / "snippet.py"
    path.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(path)],
        # from the checkout, so mypy finds this tree's actorflow and its configuration
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    reveals, errors = _expectations(source)
    seen_reveals: dict[int, str] = {}
    seen_errors: dict[int, str] = {}
    for line in done.stdout.splitlines():
        found = re.match(r".*snippet\.py:(\d+): (note|error): (.*?)(?:  \[([\w-]+)\])?$", line)
        if found is None:
            continue
        number, kind, text, code = int(found[1]), found[2], found[3], found[4]
        if kind == "note" and text.startswith("Revealed type is "):
            seen_reveals[number] = text.removeprefix("Revealed type is ").strip('"')
        elif kind == "error":
            seen_errors[number] = code or text
    assert (seen_reveals, seen_errors) == (reveals, errors), done.stdout + done.stderr
