"""Agent roles on top of the runtime: Orchestrator, Specialist, Evaluator, @phase."""

from __future__ import annotations

__all__: list[str] = []
