"""Helpers for testing your own workflows' recovery, and your own stores.

Crash a run at every point of its log, recover it in a fresh runtime and
compare with a run that never crashed::

    import itertools

    from actorflow.testing import crash_and_recover


    async def test_survives_a_crash_anywhere():
        for after in itertools.count(1):
            outcome = await crash_and_recover(
                MyWorkflow, my_input, crash_after=after, responses={"Publish the draft?": "yes"}
            )
            assert outcome.recovered == outcome.expected, f"crash after {after} records"
            if not outcome.crashed:  # past the end of the run's log: every point was tried
                break

The crash is simulated in-process: once ``crash_after`` log records are
durable, the store accepts no more writes (as if the process had died at that
instant), the run's claims are dropped as the operating system would drop a
dead process's locks, and the runtime is torn down. Recovery then runs on the
same data. For crashes of real processes, kill a child process with SIGKILL
and call ``runtime.recover()`` in a new one (see docs/recovery.md).

Check that today's code still replays stored runs, or production histories
exported with ``actorflow export`` (see docs/deploying.md)::

    from actorflow.testing import replay


    async def test_production_histories_still_replay():
        report = await replay("tests/histories/order-17.afh", MyWorkflow)
        assert report.ok, report.describe()

A store of your own runs the conformance suite every store passes:
``actorflow.testing.conformance`` (it needs pytest, so it is imported only by
name; see docs/storage.md, "Writing your own store").

Schedules read the time from the runtime's clock: ``Runtime(clock=FakeClock(...))``
lets a test move it by hand (see docs/flow-control.md).
"""

from __future__ import annotations

from actorflow.testing._clock import FakeClock
from actorflow.testing._crash import CrashOutcome, crash_and_recover, run_in_memory
from actorflow.testing._replay import replay
from actorflow.testing._store import CrashingStore, SimulatedCrashError

__all__ = [
    "CrashOutcome",
    "CrashingStore",
    "FakeClock",
    "SimulatedCrashError",
    "crash_and_recover",
    "replay",
    "run_in_memory",
]
