"""Errors about flow control: retry policies and limits."""

from __future__ import annotations

from actorflow.errors._base import ActorflowError, ConfigurationError

__all__ = ["LimitValueError", "RetryPolicyError", "UnknownLimitError"]


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
