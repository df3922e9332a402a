"""A finished run's engine objects are freed at once, not left to the cycle collector.

With a thousand runs at a time, objects kept alive by reference cycles pile
up between collections and the collector's passes cost more than the runs.
"""

from __future__ import annotations

import gc

from actorflow import Runtime, RuntimeConfig
from actorflow.storage import MemoryStore
from tests.runtime.workflow.workflows import Lead, Report


async def test_a_finished_run_leaves_none_of_its_objects_in_reference_cycles() -> None:
    async with Runtime(store=MemoryStore(), config=RuntimeConfig(retention=None)) as runtime:
        await runtime.run(Lead, "warm;up")
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            # phases, spawns, a gather of asks, an evaluator, a decision
            report = await runtime.run(Lead, "a;b;c;d")
            gc.collect()
            ours = sorted(
                {
                    type(o).__qualname__
                    for o in gc.garbage
                    if type(o).__module__.startswith("actorflow")
                }
            )
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert isinstance(report, Report)
    assert ours == []
