"""Agent roles on top of the runtime: Orchestrator, Specialist, Evaluator, @phase, @update."""

from __future__ import annotations

from actorflow.agents._phase import phase
from actorflow.agents._roles import Evaluator, Orchestrator, Specialist
from actorflow.runtime import update

__all__ = ["Evaluator", "Orchestrator", "Specialist", "phase", "update"]
