"""OpenTelemetry traces and metrics of runs (``actorflow[otel]``), or nothing at all.

Tracing is on for an attempt when the runtime's ``tracing`` option is on, the
OpenTelemetry API is installed, and the application installed an SDK tracer
or meter provider as the global one (the API alone has only its no-op
providers). An application that never imported OpenTelemetry cannot have
installed one: then this module does not import it either. Off,
:func:`start_run_trace` returns None and the engine's hooks are
``if trace is not None`` checks: no span, no context variable.

One trace per attempt: the attempt's ``actorflow.run`` span is the root of
every span the attempt makes (recovery, phases, steps, agent handlers,
checkpoint writes). A recovery's run span links to the previous attempt's
run span, whose W3C ``traceparent`` the manifest keeps (``trace_context``).
A replayed step is a zero-length span marked ``actorflow.replayed=true``: it
shows where the step sits in the run without counting as work. The spans and
metrics themselves are ``_otel``'s.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from actorflow.runtime.workflow._otel import RunTrace
    from actorflow.runtime.workflow._progress import StepMeta
    from actorflow.storage import RunManifest

__all__ = [
    "AVAILABLE",
    "carried",
    "child_started",
    "remote_handler",
    "start_run_trace",
    "traced_handler",
]

AVAILABLE = importlib.util.find_spec("opentelemetry") is not None
"""Whether the OpenTelemetry API is installed (the ``otel`` extra)."""

_API_MODULES = ("opentelemetry.trace", "opentelemetry.metrics")
"""What an application imports to install a provider."""


def _in_use() -> bool:
    """Whether the application may have installed a provider: it imported OpenTelemetry."""
    modules = sys.modules
    return AVAILABLE and (_API_MODULES[0] in modules or _API_MODULES[1] in modules)


def start_run_trace(enabled: bool, manifest: RunManifest) -> RunTrace | None:
    """The attempt's trace, started now; None when tracing is off (see the module docstring)."""
    if not (enabled and _in_use()):
        return None
    from actorflow.runtime.workflow import _otel

    return _otel.RunTrace(manifest) if _otel.sdk_installed() else None


def child_started(span: Span | None, child_id: str) -> None:
    """Note that the step of ``span`` started child run ``child_id`` (its run span links to it)."""
    if span is not None:
        from actorflow.runtime.workflow import _otel

        _otel.child_started(span, child_id)


def traced_handler(span: Span, meta: StepMeta) -> None:
    """Have ``meta``'s handler run in a span that is a child of the step's ``span``."""
    from actorflow.runtime.workflow import _otel

    _otel.traced_handler(span, meta)


def carried(meta: StepMeta) -> str | None:
    """The ``traceparent`` a step's message carries to another process (None: untraced)."""
    if meta.span is None:
        return None
    from actorflow.runtime.workflow import _otel

    return _otel.carried(meta)


def remote_handler(parent: str | None, meta: StepMeta) -> None:
    """The serving side of a step from another process: its handler's span joins ``parent``.

    Only where this process traces too (it installed an SDK provider).
    """
    if parent is not None and _in_use():
        from actorflow.runtime.workflow import _otel

        _otel.remote_handler(parent, meta)
