"""The OpenTelemetry side of tracing: spans and metrics of an attempt (``RunTrace``).

Imported only by :mod:`._tracing`, and only once an application has imported
OpenTelemetry itself: a process that never does pays no import for it. See
:mod:`._tracing` for when tracing is on.
"""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from contextlib import AbstractContextManager
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Observation
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider

    from actorflow.runtime.flow import Limiters
    from actorflow.runtime.workflow._progress import StepMeta
    from actorflow.storage import ErrorInfo, RunManifest

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "AGENT",
    "ATTEMPT",
    "CODE_VERSION",
    "IDEMPOTENCY_KEY",
    "REPLAYED",
    "RUN_ID",
    "STEP_ID",
    "WORKFLOW",
    "RunTrace",
    "carried",
    "child_started",
    "remote_handler",
    "sdk_installed",
    "traced_handler",
    "watch_limits",
]

RUN_ID: Final = "actorflow.run.id"
WORKFLOW: Final = "actorflow.workflow"
CODE_VERSION: Final = "actorflow.code_version"
STEP_ID: Final = "actorflow.step.id"
AGENT: Final = "actorflow.agent"
ATTEMPT: Final = "actorflow.attempt"
IDEMPOTENCY_KEY: Final = "actorflow.idempotency_key"
REPLAYED: Final = "actorflow.replayed"
STEP_KIND: Final = "actorflow.step.kind"
STATUS: Final = "actorflow.run.status"
PHASE: Final = "actorflow.phase"
LIMIT: Final = "actorflow.limit"

_SCOPE: Final = "actorflow"

# GenAI semantic conventions for what a handler reports (``report(input_tokens=...)``)
_GEN_AI_USAGE: Final = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "prompt_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "completion_tokens": "gen_ai.usage.output_tokens",
}

# the limiters of runtimes whose runs are traced: the limit gauges read them
_watched: weakref.WeakSet[Limiters] = weakref.WeakSet()

# a child run's parent step span, by child run id, until the child's attempt starts
_child_links: dict[str, SpanContext] = {}


def sdk_installed() -> bool:
    """Whether a real (SDK) tracer or meter provider is the global one.

    The API's own providers (its proxies and no-ops) live in its modules;
    anything else was installed by the application.
    """
    tracer_provider = type(otel_trace.get_tracer_provider()).__module__
    meter_provider = type(otel_metrics.get_meter_provider()).__module__
    return not tracer_provider.startswith("opentelemetry.trace") or not meter_provider.startswith(
        "opentelemetry.metrics"
    )


# bound once: the determinism guard wraps ``time.time`` while orchestrators run,
# and the engine's own reads need not pass through its wrapper
_wall = time.time
_ns = time.time_ns


class _Instruments:
    """The metrics instruments, made on first use from the global meter provider."""

    def __init__(self) -> None:
        meter = otel_metrics.get_meter(_SCOPE)
        self.runs: Counter = meter.create_counter(
            "actorflow.runs", unit="{run}", description="Attempts at runs ended, by status"
        )
        self.step_duration: Histogram = meter.create_histogram(
            "actorflow.step.duration", unit="s", description="Live steps, issue to record"
        )
        self.retries: Counter = meter.create_counter(
            "actorflow.step.retries", unit="{retry}", description="Agent tasks retried"
        )
        self.checkpoint_size: Histogram = meter.create_histogram(
            "actorflow.checkpoint.size", unit="By", description="Bytes stored per snapshot"
        )
        self.checkpoint_duration: Histogram = meter.create_histogram(
            "actorflow.checkpoint.duration", unit="s", description="Snapshot writes"
        )
        self.mailbox_depth: Histogram = meter.create_histogram(
            "actorflow.agent.mailbox.depth",
            unit="{message}",
            description="Messages already in an agent's mailbox when a step's message joins them",
        )
        self.inbox_depth: Histogram = meter.create_histogram(
            "actorflow.run.inbox.depth",
            unit="{message}",
            description="Signals in a run's inbox no wait has taken yet, after each read of it",
        )
        self.limit_wait: Histogram = meter.create_histogram(
            "actorflow.limit.wait", unit="s", description="Asks' waits for a Limit, by key"
        )
        meter.create_observable_gauge(
            "actorflow.limit.queued",
            callbacks=[_limit_gauge("queued")],
            unit="{ask}",
            description="Asks waiting for a Limit now, by key (this process)",
        )
        meter.create_observable_gauge(
            "actorflow.limit.running",
            callbacks=[_limit_gauge("running")],
            unit="{ask}",
            description="Asks holding a Limit now, by key (this process)",
        )


def _limit_gauge(field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A gauge's callback: ``field`` of each watched limit's stats, summed by key."""
    from opentelemetry.metrics import Observation

    def observe(_: CallbackOptions) -> Iterable[Observation]:
        totals: dict[str, int] = {}
        while True:  # a reader's thread: a runtime may start watching meanwhile
            try:
                watched = list(_watched)
            except RuntimeError:
                continue
            break
        for limiters in watched:
            for key, stats in limiters.stats().items():
                totals[key] = totals.get(key, 0) + getattr(stats, field)
        return [Observation(value, {LIMIT: key}) for key, value in totals.items()]

    return observe


def watch_limits(limiters: Limiters) -> None:
    """Have the limit gauges read ``limiters`` while the runtime that has them lives."""
    if limiters not in _watched:  # once per runtime: the set changes as seldom as can be
        _watched.add(limiters)


_instruments: _Instruments | None = None


def _metrics() -> _Instruments:
    global _instruments
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


def traceparent(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span`` (None if it is not recording)."""
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, otel_trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _context_of(parent: str | None) -> Context | None:
    if not parent:
        return None
    return TraceContextTextMapPropagator().extract({"traceparent": parent})


def _fail(span: Span, error: ErrorInfo) -> None:
    span.set_status(Status(StatusCode.ERROR, f"{error.type}: {error.message}"))
    span.add_event("exception", {"exception.type": error.type, "exception.message": error.message})


def child_started(span: Span | None, child_id: str) -> None:
    """Note that the step of ``span`` started child run ``child_id`` (its run span links to it)."""
    if span is not None:
        if len(_child_links) > 10_000:  # children started elsewhere never pop theirs
            _child_links.clear()
        _child_links[child_id] = span.get_span_context()


class RunTrace:
    """One attempt's spans and metrics: the run span and everything under it."""

    def __init__(self, manifest: RunManifest) -> None:
        self.tracer: Tracer = _get_tracer()
        self.metrics = _metrics()
        self.run_id = run_id = manifest.run_id
        self.workflow = manifest.workflow
        attrs: dict[str, Any] = {
            RUN_ID: run_id,
            WORKFLOW: manifest.workflow,
            ATTEMPT: manifest.attempt,
        }
        if manifest.code_version is not None:
            attrs[CODE_VERSION] = manifest.code_version
        if manifest.parent_run is not None:
            attrs["actorflow.parent_run.id"] = manifest.parent_run
            attrs["actorflow.parent_step.id"] = manifest.parent_step or ""
        links = []
        previous = _context_of(manifest.trace_context)
        if previous is not None:
            ctx = otel_trace.get_current_span(previous).get_span_context()
            if ctx.is_valid:
                links.append(Link(ctx, {"actorflow.link": "previous_attempt"}))
        parent_step = _child_links.pop(run_id, None)
        if parent_step is not None:
            links.append(Link(parent_step, {"actorflow.link": "parent_step"}))
        # a new trace per attempt, whatever span is current where the run was started
        self.span = self.tracer.start_span(
            "actorflow.run",
            context=otel_context.Context(),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
        )
        self.context = otel_trace.set_span_in_context(self.span, otel_context.Context())
        self._token: Token[Context] | None = None

    @property
    def traceparent(self) -> str | None:
        """The run span's W3C ``traceparent``, for the manifest (the next attempt links to it)."""
        return traceparent(self.span)

    # --- the attempt's context ----------------------------------------------------

    @staticmethod
    def watch(limiters: Limiters) -> None:
        """Have the limit gauges read ``limiters`` (the runtime's) while they live."""
        watch_limits(limiters)

    def attach(self) -> None:
        """Make the run span current in the attempt's task (its steps start under it)."""
        self._token = otel_context.attach(self.context)

    def detach(self) -> None:
        """Undo :meth:`attach` (in the same task)."""
        if self._token is not None:
            otel_context.detach(self._token)
            self._token = None

    def end(self, status: str, error: BaseException | None) -> None:
        """End the run span with the attempt's outcome, and count it.

        A paused run is no error (its ``RunPaused`` is how its handle hears of it).
        """
        span = self.span
        span.set_attribute(STATUS, status)
        if error is not None and status != "paused":
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()
        self.metrics.runs.add(1, {STATUS: status, WORKFLOW: self.workflow})

    # --- spans under the run ------------------------------------------------------

    def recovery(self) -> AbstractContextManager[Span]:
        """A span over reading the run back (``with``-able)."""
        return self.tracer.start_as_current_span(
            "actorflow.recovery", context=self.context, attributes={RUN_ID: self.run_id}
        )

    def phase(self, name: str, phase_id: str, replayed: bool) -> tuple[Span, Token[Context] | None]:
        """Start a phase's span and make it current; end it with :meth:`end_phase`."""
        attrs: dict[str, Any] = {RUN_ID: self.run_id, PHASE: name, STEP_ID: phase_id}
        if replayed:
            attrs[REPLAYED] = True
            now = _ns()
            span = self.tracer.start_span("actorflow.phase", attributes=attrs, start_time=now)
            span.end(end_time=now)
            return span, None
        span = self.tracer.start_span("actorflow.phase", attributes=attrs)
        return span, otel_context.attach(otel_trace.set_span_in_context(span))

    @staticmethod
    def end_phase(span: Span, token: Token[Context] | None, error: BaseException | None) -> None:
        """End a phase's span (started by :meth:`phase`)."""
        if token is not None:
            otel_context.detach(token)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()

    def step(self, kind: str, step_id: str, target: str | None, replayed: bool) -> Span | None:
        """A live step's span, under the current phase (or the run).

        A replayed step's is ended at once, zero-length (None is returned).
        """
        attrs: dict[str, Any] = {
            RUN_ID: self.run_id,
            STEP_ID: step_id,
            STEP_KIND: kind,
            IDEMPOTENCY_KEY: f"{self.run_id}/{step_id}",
        }
        if target is not None:
            attrs[AGENT] = target
        name = f"actorflow.step.{_STEP_NAMES.get(kind, kind)}"
        if replayed:
            attrs[REPLAYED] = True
            now = _ns()
            self.tracer.start_span(name, attributes=attrs, start_time=now).end(end_time=now)
            return None
        return self.tracer.start_span(name, attributes=attrs)

    def step_done(
        self, span: Span, kind: str, issued: float, error: ErrorInfo | None, attempts: int
    ) -> None:
        """End a live step's span with its outcome; record its latency and retries."""
        if attempts > 1:
            span.set_attribute(ATTEMPT, attempts)
            self.metrics.retries.add(attempts - 1, {STEP_KIND: kind})
        if error is not None:
            _fail(span, error)
        span.end()
        if issued:
            self.metrics.step_duration.record(
                max(0.0, _wall() - issued), {STEP_KIND: kind, WORKFLOW: self.workflow}
            )

    def update(self, step_id: str, issued: float) -> None:
        """An update's span: from when it was taken up (``issued``) until now."""
        attrs: dict[str, Any] = {
            RUN_ID: self.run_id,
            STEP_ID: step_id,
            STEP_KIND: "update",
            IDEMPOTENCY_KEY: f"{self.run_id}/{step_id}",
        }
        start = int(issued * 1e9) if issued else None
        span = self.tracer.start_span(
            "actorflow.step.update", context=self.context, attributes=attrs, start_time=start
        )
        span.end()
        if issued:
            self.metrics.step_duration.record(
                max(0.0, _wall() - issued), {STEP_KIND: "update", WORKFLOW: self.workflow}
            )

    def limit_wait(self, key: str, seconds: float) -> None:
        """An ask waited ``seconds`` for limit ``key``."""
        self.metrics.limit_wait.record(seconds, {LIMIT: key, WORKFLOW: self.workflow})

    def inbox_depth(self, untaken: int) -> None:
        """Record how many signals in the run's inbox wait for a wait to take them."""
        self.metrics.inbox_depth.record(untaken, {WORKFLOW: self.workflow})

    def checkpoint(
        self, started_ns: int, size: int | None, seconds: float, error: BaseException | None
    ) -> None:
        """A snapshot write (from ``started_ns``, now over), under the run span."""
        span = self.tracer.start_span(
            "actorflow.checkpoint",
            context=self.context,
            attributes={RUN_ID: self.run_id},
            start_time=started_ns,
        )
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        else:
            span.set_attribute("actorflow.checkpoint.size", size or 0)
            self.metrics.checkpoint_size.record(size or 0, {WORKFLOW: self.workflow})
            self.metrics.checkpoint_duration.record(seconds, {WORKFLOW: self.workflow})
        span.end()


_STEP_NAMES: Final = {"decision": "decide"}
"""Span names that differ from the step's record kind."""


_tracers: dict[int, tuple[TracerProvider, Tracer]] = {}
"""actorflow's tracer of each provider it met (a provider makes a new one per call)."""


def _get_tracer() -> Tracer:
    """actorflow's tracer from the global provider."""
    provider = otel_trace.get_tracer_provider()
    kept = _tracers.get(id(provider))
    if kept is None or kept[0] is not provider:
        _tracers.clear()  # one global provider at a time
        kept = _tracers[id(provider)] = (provider, provider.get_tracer(_SCOPE))
    return kept[1]


def _handler_around(
    parent: Context, meta: StepMeta, attempt: int
) -> Callable[[Callable[[Any, Any], Awaitable[Any]], int], Callable[[Any, Any], Awaitable[Any]]]:
    """What ``ActorRef.deliver`` wraps the handler with: a span over its invocation."""
    tracer = _get_tracer()

    def around(
        fn: Callable[[Any, Any], Awaitable[Any]], depth: int
    ) -> Callable[[Any, Any], Awaitable[Any]]:
        info = meta.info
        _metrics().mailbox_depth.record(depth)

        async def traced(actor: Any, msg: object) -> Any:
            attrs: dict[str, Any] = {
                RUN_ID: info.run_id,
                STEP_ID: info.step_id,
                AGENT: actor.name,
                ATTEMPT: attempt,
                IDEMPOTENCY_KEY: info.key,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": actor.name,
            }
            with tracer.start_as_current_span(
                "actorflow.handler", context=parent, attributes=attrs
            ) as span:
                try:
                    return await fn(actor, msg)
                finally:
                    for name, value in meta.metrics.items():
                        key = _GEN_AI_USAGE.get(name)
                        span.set_attribute(key or f"actorflow.metric.{name}", value)

        return traced

    return around


def traced_handler(span: Span, meta: StepMeta) -> None:
    """Have ``meta``'s handler run in a span that is a child of the step's ``span``."""
    parent = otel_trace.set_span_in_context(span, otel_context.Context())
    meta.around = _handler_around(parent, meta, meta.info.attempt)
    meta.span = span


def carried(meta: StepMeta) -> str | None:
    """The ``traceparent`` a step's message carries to another process (None: untraced)."""
    return traceparent(meta.span) if meta.span is not None else None


def remote_handler(parent: str, meta: StepMeta) -> None:
    """The serving side of a step from another process: its handler's span joins ``parent``."""
    if not sdk_installed():
        return
    context = _context_of(parent)
    assert context is not None
    meta.around = _handler_around(context, meta, meta.info.attempt)
