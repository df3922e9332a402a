"""Flow control: retry policies, limits by key, and the clock they wait on."""

from __future__ import annotations

from actorflow.runtime.flow._clock import Clock, SystemClock
from actorflow.runtime.flow._limits import Limit, Limiter, Limiters, LimitStats, Permit
from actorflow.runtime.flow._retry import RetryAfter, RetryPolicy, retry_hint

__all__ = [
    "Clock",
    "Limit",
    "LimitStats",
    "Limiter",
    "Limiters",
    "Permit",
    "RetryAfter",
    "RetryPolicy",
    "SystemClock",
    "retry_hint",
]
