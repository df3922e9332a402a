"""OpenTelemetry spans of runs: the tree of an attempt, recovery links, child runs, the switch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
from opentelemetry import trace

from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import ConfigurationError, RunPaused
from actorflow.runtime.cluster import RemoteStep
from actorflow.runtime.workflow import _tracing
from actorflow.runtime.workflow._progress import StepInfo, StepMeta
from actorflow.runtime.workflow._tracing import traced_handler
from actorflow.storage import MemoryStore, StepRecord
from actorflow.testing import crash_and_recover

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = str(Path(__file__).resolve().parents[2])


class Question(Request[str], frozen=True):
    text: str


class Researcher(Specialist):
    @handler
    async def research(self, q: Question) -> str:
        self.report(input_tokens=12, output_tokens=30)
        if q.text == "boom":
            raise ValueError("no answer")
        return q.text.upper()


class FanOut(Orchestrator):
    @phase
    async def research(self, ctx: RunContext, questions: list[str]) -> list[str]:
        team = [await ctx.spawn(Researcher, name=f"r{i}") for i in range(2)]
        return await ctx.gather(
            *(ctx.ask(team[i % 2], Question(q)) for i, q in enumerate(questions))
        )

    async def run(self, ctx: RunContext, goal: str) -> list[str]:
        found = await self.research(ctx, goal.split(";"))
        await ctx.decide("done", rationale="all answered")
        return found


class Double(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        return 2 * n


class Parent(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        value: int = await ctx.run_child(Double, n)
        return value


class Flaky(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        r = await ctx.spawn(Researcher, name="r")
        answer: str = await ctx.ask(r, Question("boom"))
        return answer


def _by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _start(span: ReadableSpan) -> int:
    return span.start_time or 0


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _run_spans(spans: tuple[ReadableSpan, ...], run_id: str) -> list[ReadableSpan]:
    return [
        s for s in spans if s.name == "actorflow.run" and _attrs(s)["actorflow.run.id"] == run_id
    ]


async def test_a_fan_out_run_is_one_tree_under_its_run_span(spans: InMemorySpanExporter) -> None:
    config = RuntimeConfig(code_version="v7")
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        result = await runtime.run(FanOut, "a;b;c", run_id="fan")
    assert result == ["A", "B", "C"]
    finished = spans.get_finished_spans()
    by_id = _by_id(finished)
    [run] = _run_spans(finished, "fan")
    assert _attrs(run)["actorflow.workflow"].endswith("FanOut")
    assert _attrs(run)["actorflow.code_version"] == "v7"
    assert _attrs(run)["actorflow.attempt"] == 0
    assert run.parent is None
    # one trace for the attempt: every span of it
    assert {s.context.trace_id for s in finished} == {run.context.trace_id}
    [phase_span] = [s for s in finished if s.name == "actorflow.phase"]
    assert _parent(phase_span) == run.context.span_id
    asks = [s for s in finished if s.name == "actorflow.step.ask"]
    assert len(asks) == 3
    for ask in asks:
        assert _parent(ask) == phase_span.context.span_id
        a = _attrs(ask)
        assert a["actorflow.idempotency_key"] == f"fan/{a['actorflow.step.id']}"
        assert a["actorflow.agent"] in ("r0", "r1")
    handlers = [s for s in finished if s.name == "actorflow.handler"]
    assert len(handlers) == 3
    for h in handlers:
        parent = by_id[_parent(h) or 0]
        assert parent.name == "actorflow.step.ask"
        assert _attrs(h)["actorflow.step.id"] == _attrs(parent)["actorflow.step.id"]
        assert _attrs(h)["gen_ai.usage.input_tokens"] == 12
        assert _attrs(h)["gen_ai.usage.output_tokens"] == 30
    spawns = [s for s in finished if s.name == "actorflow.step.spawn"]
    assert len(spawns) == 2
    [decide] = [s for s in finished if s.name == "actorflow.step.decide"]
    assert _parent(decide) == run.context.span_id
    checkpoints = [s for s in finished if s.name == "actorflow.checkpoint"]
    assert checkpoints, "the phase and final snapshots"
    for c in checkpoints:
        assert _parent(c) == run.context.span_id
    assert not [s for s in finished if _attrs(s).get("actorflow.replayed")]


async def test_a_failed_handler_is_an_error_on_its_span(spans: InMemorySpanExporter) -> None:
    config = RuntimeConfig(step_retries=1, retry_backoff=0)
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        handle = await runtime.start(Flaky, None, run_id="flaky")
        try:
            await handle.result()
        except Exception:
            pass
    finished = spans.get_finished_spans()
    handlers = [s for s in finished if s.name == "actorflow.handler"]
    assert [_attrs(h)["actorflow.attempt"] for h in handlers] == [1, 2]
    assert all(h.status.status_code.name == "ERROR" for h in handlers)
    [ask] = [s for s in finished if s.name == "actorflow.step.ask"]
    assert ask.status.status_code.name == "ERROR"
    assert _attrs(ask)["actorflow.attempt"] == 2
    [run] = _run_spans(finished, "flaky")
    assert run.status.status_code.name == "ERROR"
    assert _attrs(run)["actorflow.run.status"] == "failed"


async def test_a_recovery_links_to_the_crashed_attempt(spans: InMemorySpanExporter) -> None:
    outcome = await crash_and_recover(FanOut, "a;b;c", crash_after=4, run_id="crashy")
    assert outcome.crashed
    assert outcome.recovered == outcome.expected
    finished = spans.get_finished_spans()
    runs = _run_spans(finished, "crashy")
    # the uninterrupted run, the attempt that crashed, the recovery
    _first, crashed, recovered = sorted(runs, key=lambda s: s.start_time or 0)
    assert _attrs(recovered)["actorflow.attempt"] == 1
    assert recovered.context.trace_id != crashed.context.trace_id
    [link] = recovered.links
    assert link.context.span_id == crashed.context.span_id
    assert link.context.trace_id == crashed.context.trace_id
    in_recovery = [s for s in finished if s.context.trace_id == recovered.context.trace_id]
    [reading] = [s for s in in_recovery if s.name == "actorflow.recovery"]
    assert _parent(reading) == recovered.context.span_id
    replayed = [s for s in in_recovery if _attrs(s).get("actorflow.replayed")]
    assert replayed, "the steps recorded before the crash"
    for s in replayed:
        assert s.start_time == s.end_time, "a replayed step is not timed as work"
    replayed_ids = {_attrs(s)["actorflow.step.id"] for s in replayed if "step" in s.name}
    handled = {_attrs(s)["actorflow.step.id"] for s in in_recovery if s.name == "actorflow.handler"}
    assert replayed_ids.isdisjoint(handled), "a replayed step reaches no agent"


async def test_a_child_run_links_to_the_step_that_started_it(
    spans: InMemorySpanExporter,
) -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        assert await runtime.run(Parent, 4, run_id="parent") == 8
    finished = spans.get_finished_spans()
    [parent] = _run_spans(finished, "parent")
    [child_step] = [s for s in finished if s.name == "actorflow.step.child"]
    assert _parent(child_step) == parent.context.span_id
    [child] = [
        s
        for s in finished
        if s.name == "actorflow.run" and _attrs(s).get("actorflow.parent_run.id") == "parent"
    ]
    assert child.context.trace_id != parent.context.trace_id, "a trace per run attempt"
    [link] = child.links
    assert link.context.span_id == child_step.context.span_id
    assert _attrs(child)["actorflow.parent_step.id"] == _attrs(child_step)["actorflow.step.id"]


async def test_tracing_off_makes_no_spans(spans: InMemorySpanExporter) -> None:
    config = RuntimeConfig.from_env({"ACTORFLOW_TRACING": "off"})
    assert config.tracing is False
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        assert await runtime.run(FanOut, "a;b", run_id="quiet") == ["A", "B"]
    assert spans.get_finished_spans() == ()


async def test_metrics_count_runs_steps_and_checkpoints(
    spans: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        await runtime.run(FanOut, "a;b", run_id="measured")
    data = metric_reader.get_metrics_data()
    assert data is not None
    names = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    assert {
        "actorflow.runs",
        "actorflow.step.duration",
        "actorflow.checkpoint.size",
        "actorflow.checkpoint.duration",
        "actorflow.agent.mailbox.depth",
    } <= set(names)
    statuses = {
        dict(p.attributes or {}).get("actorflow.run.status")
        for p in names["actorflow.runs"].data.data_points
    }
    assert "completed" in statuses


async def test_a_step_served_in_another_process_carries_its_trace(
    spans: InMemorySpanExporter,
) -> None:
    """The envelope a cluster sends (``RemoteStep``) carries the step span's context.

    The serving side unpacks it into the meta its handler runs with: the
    handler's span is the step span's child, in the same trace.
    """
    step_span = trace.get_tracer("test").start_span("actorflow.step.ask")
    info = StepInfo(run_id="far-run", step_id="0", key="far-run/0")

    async def keep(data: bytes) -> None:
        pass

    sent = StepMeta(info, keep, None)
    traced_handler(step_span, sent)
    served = RemoteStep.unpack(RemoteStep.pack(sent))
    assert served is not None
    async with Runtime(store=MemoryStore()) as runtime:
        ref = await runtime.spawn(Researcher, name="far")
        reply = await ref.deliver(Question("x"), served.meta)
        await reply.event.wait()
    step_span.end()
    [handler_span] = [s for s in spans.get_finished_spans() if s.name == "actorflow.handler"]
    assert _parent(handler_span) == step_span.get_span_context().span_id
    assert handler_span.context.trace_id == step_span.get_span_context().trace_id
    assert _attrs(handler_span)["actorflow.idempotency_key"] == "far-run/0"
    assert _attrs(handler_span)["gen_ai.usage.output_tokens"] == 30
    assert RemoteStep.pack(StepMeta(info, keep, None)) != RemoteStep.pack(sent)


async def test_an_untraced_step_travels_as_before(spans: InMemorySpanExporter) -> None:
    info = StepInfo(run_id="far-run", step_id="0", key="far-run/0")

    async def keep(data: bytes) -> None:
        pass

    served = RemoteStep.unpack(RemoteStep.pack(StepMeta(info, keep, None)))
    assert served is not None
    assert isinstance(served.meta, StepMeta)
    assert served.meta.around is None


def test_the_switch_is_checked_and_read_from_the_environment() -> None:
    assert RuntimeConfig().tracing is True
    assert RuntimeConfig.from_env({"ACTORFLOW_TRACING": "0"}).tracing is False
    assert RuntimeConfig.from_env({"ACTORFLOW_TRACING": "On"}).tracing is True
    with pytest.raises(ConfigurationError, match="ACTORFLOW_TRACING"):
        RuntimeConfig.from_env({"ACTORFLOW_TRACING": "maybe"})
    with pytest.raises(ConfigurationError, match="tracing"):
        RuntimeConfig(tracing="yes")  # type: ignore[arg-type]


def test_the_api_alone_makes_no_trace() -> None:
    """A fresh process with the OpenTelemetry API: no import of it, no trace, until asked."""
    code = (
        "import sys\n"
        "from actorflow.runtime.workflow import _tracing as t\n"
        "from actorflow.storage import RunManifest\n"
        "m = RunManifest(run_id='r', workflow='W', input=b'', input_hash='')\n"
        "import actorflow, actorflow.runtime\n"
        "assert t.AVAILABLE and t.start_run_trace(True, m) is None\n"
        "assert not [n for n in sys.modules if n.startswith('opentelemetry')]\n"
        "import opentelemetry.trace\n"
        "assert t.start_run_trace(True, m) is None  # the API's no-op provider\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, timeout=60, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


async def test_without_the_api_nothing_is_traced(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tracing, "AVAILABLE", False)
    async with Runtime(store=MemoryStore()) as runtime:
        assert await runtime.run(FanOut, "a", run_id="bare") == ["A"]
    assert spans.get_finished_spans() == ()


class Go(msgspec.Struct, frozen=True):
    n: int


class WaitsForGo(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> int:
        go = await ctx.wait_for(Go)
        return go.n


async def test_a_signal_is_a_wait_step_and_the_inbox_depth_is_measured(
    spans: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    config = RuntimeConfig(signal_poll_interval=0.01)
    async with Runtime(store=MemoryStore(), config=config) as runtime:
        handle = await runtime.start(WaitsForGo, None, run_id="waits")
        await runtime.signal("waits", Go(5))
        assert await handle.result() == 5
    [wait] = [s for s in spans.get_finished_spans() if s.name == "actorflow.step.wait"]
    assert _attrs(wait)["actorflow.run.id"] == "waits"
    data = metric_reader.get_metrics_data()
    assert data is not None
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert "actorflow.run.inbox.depth" in names


class AsksAHuman(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        answer: str = await ctx.wait_for_input("ok?")
        return answer


async def test_a_paused_attempt_is_no_error(spans: InMemorySpanExporter) -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(AsksAHuman, None, run_id="asks")
        assert await runtime.resume("asks", "yes") == "yes"
    paused, resumed = sorted(_run_spans(spans.get_finished_spans(), "asks"), key=_start)
    assert _attrs(paused)["actorflow.run.status"] == "paused"
    assert paused.status.status_code.name == "UNSET"
    assert _attrs(resumed)["actorflow.run.status"] == "completed"
    [link] = resumed.links
    assert link.context.span_id == paused.context.span_id


class Naps(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> None:
        await ctx.sleep(0.01)


async def test_a_sleep_span_ends_when_it_wakes(spans: InMemorySpanExporter) -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(Naps, None, run_id="naps")
    [record] = [r for r in await store.read_log("naps") if isinstance(r, StepRecord)]
    deadline = msgspec.msgpack.decode(record.result or b"", type=float)
    [nap] = [s for s in spans.get_finished_spans() if s.name == "actorflow.step.sleep"]
    assert (nap.end_time or 0) >= int(deadline * 1e9), "not before its recorded deadline"
