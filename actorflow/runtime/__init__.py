"""The actor runtime: actors, refs, mailboxes, supervision, runs and recovery."""

from __future__ import annotations

__all__: list[str] = []
