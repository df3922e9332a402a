"""Errors about flow control: retry policies, limits, queues and schedules.

Each is raised before anything is stored: at declaration (a policy, a limit,
a queue, a schedule) or when a run or step first names what is not declared.
"""

from __future__ import annotations

from actorflow._text import safe_repr
from actorflow.errors._base import ActorflowError, ConfigurationError

__all__ = [
    "CronExpressionError",
    "DedupKeyError",
    "FlowControlError",
    "LimitValueError",
    "QueueNotDeclaredError",
    "RetryPolicyError",
    "ScheduleNotFoundError",
    "UnknownLimitError",
]


class RetryPolicyError(ConfigurationError):
    """A ``RetryPolicy`` with a value it cannot use (negative, or backoffs out of order)."""


class LimitValueError(ConfigurationError):
    """A ``Limit`` with a rate or cap that is zero, negative or not a number."""


class UnknownLimitError(ActorflowError, LookupError):
    """A handler or agent class names a limit the runtime did not declare."""

    def __init__(self, name: str, used_by: str, declared: tuple[str, ...]) -> None:
        self.name = name
        self.used_by = used_by
        self.declared = declared
        known = ", ".join(repr(d) for d in declared) if declared else "none"
        super().__init__(
            f"{used_by} uses the limit {name!r}, which the runtime does not declare "
            f"(declared: {known}); add Limit({name!r}, ...) to Runtime(limits=[...])"
        )


class FlowControlError(ActorflowError, ValueError):
    """A queue or schedule argument actorflow cannot use; nothing was stored."""


class QueueNotDeclaredError(FlowControlError, LookupError):
    """``submit`` named a queue the runtime does not declare."""

    def __init__(self, queue: str, declared: tuple[str, ...]) -> None:
        self.queue = queue
        self.declared = declared
        names = ", ".join(repr(name) for name in declared) or "none"
        super().__init__(
            f"queue {queue!r} is not declared (declared: {names}); "
            f"pass Queue({queue!r}, ...) in Runtime(queues=[...])"
        )


class DedupKeyError(FlowControlError, TypeError):
    """A deduplication key that is not a non-empty string, or given with a ``run_id``."""

    def __init__(self, key: object, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"invalid dedup_key {safe_repr(key)}: {reason}")


class CronExpressionError(FlowControlError):
    """A schedule's cron expression (or its timing arguments) does not parse."""

    def __init__(self, expression: object, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(
            f"invalid schedule timing {safe_repr(expression)}: {reason}; "
            "give cron='*/5 * * * *' (five fields) or every=timedelta(...), not both"
        )


class ScheduleNotFoundError(FlowControlError, LookupError):
    """No schedule with this id is in the store."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f"no schedule {schedule_id!r} in the store; `actorflow schedules` lists them"
        )
