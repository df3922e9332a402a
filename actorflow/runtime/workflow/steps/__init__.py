"""Every kind of step a run can take, on one pattern: issued now, replayed or run live.

A step is created by a ``ctx`` call, which issues its id synchronously (so ids
never depend on scheduling) and checks it against the log (``lookup``).
Awaiting it runs two halves: ``start`` hands its work out (a message, in issue
order, after the output-commit flush) and ``finish`` waits for the outcome and
records it (``Step._record_outcome``: every ``StepRecord`` is built by
``step_record``). A step with a record never runs: ``replay`` returns (or
raises) what was recorded. ``ctx.gather`` starts every step in order, then
finishes them together.

Adding a kind of step is one class here (and one record type, if it records
something new). The rooms: ``_base`` (``Step``, ``step_record``,
``close_namespace``); ``_ask`` (``AskStep``, ``SendStep``, their
``Turnstile`` and ``ctx.gather``'s fast path); ``_values`` (``ValueStep``,
``SleepStep``, ``SpawnStep``, ``DecideStep``, ``PatchStep``, ``EmitStep``);
``_wait`` (``WaitStep``, the one durable wait); ``_child`` (``StartChildStep``,
``ChildRun`` and its ``ChildResultStep``).
"""

from actorflow.runtime.workflow.steps._ask import AskStep, SendStep, record_as_answered
from actorflow.runtime.workflow.steps._base import Step, close_namespace, step_record
from actorflow.runtime.workflow.steps._child import ChildResultStep, ChildRun, StartChildStep
from actorflow.runtime.workflow.steps._turnstile import Turnstile
from actorflow.runtime.workflow.steps._values import (
    DecideStep,
    EmitStep,
    PatchStep,
    SleepStep,
    SpawnStep,
    ValueStep,
)
from actorflow.runtime.workflow.steps._wait import NO_DEFAULT, PauseRun, WaitStep

__all__ = [
    "NO_DEFAULT",
    "AskStep",
    "ChildResultStep",
    "ChildRun",
    "DecideStep",
    "EmitStep",
    "PatchStep",
    "PauseRun",
    "SendStep",
    "SleepStep",
    "SpawnStep",
    "StartChildStep",
    "Step",
    "Turnstile",
    "ValueStep",
    "WaitStep",
    "close_namespace",
    "record_as_answered",
    "step_record",
]
