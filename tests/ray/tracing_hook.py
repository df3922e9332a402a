"""Imported by every Ray process of the tracing test (the cluster's ``imports``).

An SDK tracer provider whose spans go, one JSON line each, to a file of the
process's own in ``ACTORFLOW_TEST_SPANS``: the test reads them all back.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan


class _LinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                parent = span.parent.span_id if span.parent is not None else None
                line = {
                    "name": span.name,
                    "trace_id": span.context.trace_id,
                    "span_id": span.context.span_id,
                    "parent": parent,
                    "attributes": dict(span.attributes or {}),
                    "pid": os.getpid(),
                }
                out.write(json.dumps(line) + "\n")
        return SpanExportResult.SUCCESS


def install() -> None:
    """Install the provider, if the test asked for spans (its variable is set)."""
    folder = os.environ.get("ACTORFLOW_TEST_SPANS")
    if folder and not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        path = os.path.join(folder, f"{os.getpid()}.jsonl")
        provider.add_span_processor(SimpleSpanProcessor(_LinesExporter(path)))
        trace.set_tracer_provider(provider)


def read_spans(folder: str) -> list[dict[str, Any]]:
    """Every span the cluster's processes wrote to ``folder``."""
    spans: list[dict[str, Any]] = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as lines:
            spans += [json.loads(line) for line in lines if line.strip()]
    return spans


install()  # on import: the hosts and placed agents import the cluster's modules as they start
