"""One SDK tracer and meter provider per process (OpenTelemetry allows one), cleared per test."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

if TYPE_CHECKING:
    from collections.abc import Iterator

_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()
_installed = False


def _install() -> None:
    global _installed
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
        _installed = True


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test (the SDK provider installed once per process)."""
    _install()
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    """The process's in-memory metric reader (cumulative: compare before and after)."""
    _install()
    return _READER
