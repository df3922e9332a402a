"""Agent roles on top of the runtime: Orchestrator, Specialist, Evaluator, @phase."""

from __future__ import annotations

from actorflow.agents._phase import phase
from actorflow.agents._roles import Evaluator, Orchestrator, Specialist

__all__ = ["Evaluator", "Orchestrator", "Specialist", "phase"]
