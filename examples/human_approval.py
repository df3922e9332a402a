"""Human approval: a run pauses for a person's answer and resumes in another process.

    python examples/human_approval.py start STORE        # plans, then pauses: prints the run id
    python examples/human_approval.py resume STORE RUN yes
    # or, from the command line, with this module as the app:
    actorflow resume RUN --response yes --app human_approval:make_runtime --store STORE

The pause is a step like any other (``ctx.wait_for_input``): the process that
started the run can exit; whichever process resumes it replays the plan from
the log and continues with the answer.
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.errors import RunPaused


class Change(Request["Plan"], frozen=True):
    service: str
    replicas: int


class Plan(Request[list[str]], frozen=True):
    steps: list[str]
    risk: float


class Outcome(msgspec.Struct, frozen=True):
    approved: bool
    applied: list[str]
    approver_said: str


class DeployLog(msgspec.Struct):
    applied: list[str] = []


class Planner(Specialist):
    @handler
    async def plan(self, change: Change) -> Plan:
        steps = [f"scale {change.service} to {n}" for n in range(1, change.replicas + 1)]
        return Plan(steps, risk=min(1.0, change.replicas / 10))


class Deployer(Specialist):
    state: DeployLog

    @handler
    async def apply(self, plan: Plan) -> list[str]:
        self.state.applied.extend(plan.steps)
        return list(self.state.applied)


class Rollout(Orchestrator):
    @phase
    async def plan(self, ctx: RunContext, change: Change) -> Plan:
        planner = await ctx.spawn(Planner, name="planner")
        plan: Plan = await ctx.ask(planner, change)
        return plan

    async def run(self, ctx: RunContext, change: Change) -> Outcome:
        plan = await self.plan(ctx, change)
        answer = await ctx.wait_for_input(
            f"apply {len(plan.steps)} step(s) to {change.service} (risk {plan.risk:.1f})? yes/no"
        )
        approved = answer.strip().lower() in ("y", "yes")
        await ctx.decide(
            "apply" if approved else "abandon",
            rationale=f"a person answered {answer!r}",
            alternatives=["apply", "abandon"],
        )
        if not approved:
            return Outcome(False, [], answer)
        deployer = await ctx.spawn(Deployer, name="deployer")
        applied: list[str] = await ctx.ask(deployer, plan)
        return Outcome(True, applied, answer)


def make_runtime(store: str = "./.actorflow") -> Runtime:
    """The app `actorflow resume --app human_approval:make_runtime` loads."""
    return Runtime(store=store)


async def start(store: str) -> str:
    async with make_runtime(store) as runtime:
        try:
            await runtime.run(Rollout, Change("checkout", 3), run_id="rollout-checkout")
        except RunPaused as paused:
            print(f"paused: {paused.prompt}")
            return paused.run_id
    raise AssertionError("the run should have paused for approval")


async def resume(store: str, run_id: str, answer: str) -> Outcome:
    async with make_runtime(store) as runtime:
        outcome: Outcome = await runtime.resume(run_id, answer)
    return outcome


if __name__ == "__main__":
    command, folder = sys.argv[1], sys.argv[2]
    if command == "start":
        print(f"run {anyio.run(start, folder)} waits for approval")
    else:
        result = anyio.run(resume, folder, sys.argv[3], sys.argv[4], backend="trio")
        print(f"approved={result.approved} applied={result.applied}")
