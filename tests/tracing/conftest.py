"""One SDK tracer and meter provider per process (OpenTelemetry allows one), cleared per test."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

if TYPE_CHECKING:
    from collections.abc import Iterator

_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()
_TRACER = TracerProvider()
_TRACER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
_METER = MeterProvider(metric_readers=[_READER])


@contextmanager
def _installed() -> Iterator[None]:
    """The SDK providers as the process's, for one test, then none again.

    OpenTelemetry lets a process set its providers once; its own test
    utilities reset these globals the same way. Without the reset, every test
    after these would run traced (the engine traces whenever an SDK is set).
    """
    trace.set_tracer_provider(_TRACER)
    metrics.set_meter_provider(_METER)
    try:
        yield
    finally:
        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        metrics_api._METER_PROVIDER = None
        metrics_api._METER_PROVIDER_SET_ONCE = Once()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test, with the SDK providers set for it."""
    _EXPORTER.clear()
    with _installed():
        yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture
def metric_reader() -> Iterator[InMemoryMetricReader]:
    """The in-memory metric reader (cumulative over the process: compare before and after)."""
    with _installed():
        yield _READER
