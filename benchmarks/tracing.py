"""What OpenTelemetry tracing costs a run.

Run: ``.venv/bin/python benchmarks/tracing.py [--quick] [--backend=asyncio|trio]``.
A run of N asks to one agent (MemoryStore, default durability), the modes
taking turns run by run in one process; ratios compare medians of the same
sitting. First with the OpenTelemetry API installed but no SDK (the API's
no-op provider: actorflow makes no spans) against ``tracing=False``; then,
with the SDK's tracer provider, a ``SimpleSpanProcessor`` and the in-memory
exporter installed, tracing on against ``tracing=False`` again.
The OpenTelemetry API and SDK must be installed (``actorflow[otel]`` and
``opentelemetry-sdk``).
"""

from __future__ import annotations

import os
import statistics
import sys

import anyio
from _ask_run import us_per_ask
from _machine import cpu_model
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actorflow import RuntimeConfig

QUICK = "--quick" in sys.argv
BACKEND = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--backend=")), "asyncio")
ASKS = 500 if QUICK else 2000
ROUNDS = 5 if QUICK else 15


async def one_run(tracing: bool) -> float:
    """Microseconds per ask of one run."""
    return await us_per_ask(RuntimeConfig(tracing=tracing, retention=None), ASKS)


def alternate(exporter: InMemorySpanExporter | None = None) -> tuple[float, float, int]:
    """Median µs per ask with tracing off, and on (whatever provider is installed).

    The exporter is emptied after each run (kept spans would only load the
    garbage collector of the runs after), and the spans of a traced run counted.
    """
    times: dict[bool, list[float]] = {False: [], True: []}
    spans = 0
    for i in range(ROUNDS):
        order = [False, True]
        for mode in order if i % 2 == 0 else reversed(order):
            times[mode].append(anyio.run(one_run, mode, backend=BACKEND))
            if exporter is not None:
                spans = max(spans, len(exporter.get_finished_spans()))
                exporter.clear()
    return statistics.median(times[False]), statistics.median(times[True]), spans


def main() -> None:
    off_api, on_api, _ = alternate()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    off_sdk, on_sdk, spans = alternate(exporter)
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {sys.version.split()[0]}")
    print(f"backend {BACKEND}; {ROUNDS} runs each of {ASKS} asks, alternated; medians\n")
    print("| measure | value |")
    print("|---|---:|")
    print(f"| µs per ask, tracing off | {off_api:.2f} |")
    print(f"| µs per ask, API only (no SDK), tracing on | {on_api:.2f} |")
    print(f"| API only / off | {on_api / off_api:.3f} |")
    print(f"| µs per ask, SDK installed, tracing off | {off_sdk:.2f} |")
    print(f"| µs per ask, SDK + in-memory exporter | {on_sdk:.2f} |")
    print(f"| in-memory exporter / off | {on_sdk / off_sdk:.3f} |")
    print(f"| spans per traced run | {spans} |")
    print(f"| µs per span, in-memory exporter | {(on_sdk - off_sdk) * ASKS / spans:.1f} |")


if __name__ == "__main__":
    main()
