"""A limit's waits and queue show in OpenTelemetry metrics, by limit key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actorflow import Limit, Runtime
from actorflow.storage import MemoryStore
from actorflow.testing import FakeClock
from tests.runtime.flow import test_limits
from tests.runtime.flow.test_limits import Calls, Fan, FanOut

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _metrics(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    if data is None:  # nothing measured in this process yet
        return {}
    return {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }


def _waits(found: dict[str, Any]) -> tuple[int, float]:
    """How many waits for ``metered`` the histogram holds, and their sum."""
    if "actorflow.limit.wait" not in found:
        return 0, 0.0
    points = [
        p
        for p in found["actorflow.limit.wait"].data.data_points
        if dict(p.attributes or {}).get("actorflow.limit") == "metered"
    ]
    return sum(p.count for p in points), sum(p.sum for p in points)


async def test_waits_for_a_limit_and_its_queue_are_metrics_by_key(
    spans: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    clock = FakeClock()
    test_limits.calls = Calls(clock)
    limits = [Limit("metered", per_minute=2)]
    count, total = _waits(_metrics(metric_reader))  # the reader counts over the process
    async with Runtime(store=MemoryStore(), limits=limits, clock=clock) as runtime:
        # 3 asks with a budget of 2 a minute: the third waits a minute
        await runtime.run(FanOut, Fan("Metered", 1, 3))
        found = _metrics(metric_reader)
    after, after_total = _waits(found)
    assert after - count == 1
    assert after_total - total >= 59.0  # by the runtime's (fake) clock
    for gauge in ("actorflow.limit.queued", "actorflow.limit.running"):
        points = {
            dict(p.attributes or {}).get("actorflow.limit"): p.value
            for p in found[gauge].data.data_points
        }
        assert points["metered"] == 0  # the run is over: nobody waits or holds it
