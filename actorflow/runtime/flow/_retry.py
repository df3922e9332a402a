"""``RetryPolicy``: how often and how late a failed agent task is tried again.

A policy is code, not data: it is never stored, and a step's arguments hash
leaves it out, so a run recorded under one policy replays under another.
"""

from __future__ import annotations

import math
import random

import msgspec

from actorflow.errors import RetryPolicyError

__all__ = ["RetryAfter", "RetryPolicy", "retry_hint"]


class RetryAfter(Exception):
    """Raise it (or a subclass) from a handler to ask for a retry no sooner than ``retry_after``.

    Any exception with a numeric ``retry_after`` attribute (seconds) is read
    the same way, so an HTTP client's 429 error can carry its ``Retry-After``.

    Args:
        retry_after: seconds to wait before the next attempt.
        message: what the error says.
    """

    def __init__(self, retry_after: float, message: str = "") -> None:
        self.retry_after = float(retry_after)
        super().__init__(message or f"retry after {retry_after:g}s")


_jitter = random.Random()  # backoffs' jitter: never part of a run's recorded randomness


def retry_hint(error: BaseException) -> float | None:
    """The ``retry_after`` seconds ``error`` asks for, or None.

    The handler's own error is read through an ``ActorFailedError``'s ``error``.
    """
    inner = getattr(error, "error", None)
    for candidate in (error, inner):
        hint = getattr(candidate, "retry_after", None)
        if isinstance(hint, int | float) and not isinstance(hint, bool) and hint >= 0:
            return float(hint)
    return None


def _number(policy: RetryPolicy, name: str, *, minimum: float, maximum: float = math.inf) -> None:
    value = getattr(policy, name)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
    if not ok or not minimum <= value <= maximum:
        bound = f">= {minimum:g}" + (f" and <= {maximum:g}" if maximum != math.inf else "")
        raise RetryPolicyError(f"RetryPolicy.{name}", value, f"a number {bound}")
    msgspec.structs.force_setattr(policy, name, float(value))


def _types(policy: RetryPolicy, name: str) -> None:
    value: object = getattr(policy, name)
    if isinstance(value, type):
        value = (value,)
    if not isinstance(value, tuple | list) or not all(
        isinstance(t, type) and issubclass(t, BaseException) for t in value
    ):
        raise RetryPolicyError(f"RetryPolicy.{name}", value, "a tuple of exception classes")
    msgspec.structs.force_setattr(policy, name, tuple(value))


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a failed agent task is retried: set per call, handler, agent class or runtime.

    The delay before attempt ``n + 1`` is ``initial_backoff * multiplier ** (n - 1)``,
    at most ``max_backoff``, less up to ``jitter`` of itself at random; an error
    with a ``retry_after`` hint (:class:`RetryAfter`) waits that long instead,
    if longer. The most specific policy wins: ``ctx.ask(..., retry=)``, then
    ``@handler(retry=)``, then the agent class's ``retry`` attribute, then
    ``RuntimeConfig.retry`` (by default ``step_retries`` and ``retry_backoff``).

    Attributes:
        max_attempts: attempts in all, the first one included.
        initial_backoff: seconds before the second attempt.
        max_backoff: the longest backoff, in seconds.
        multiplier: how much each backoff grows over the one before.
        jitter: the share of each backoff taken off at random, from 0 to 1.
        retry_on: the handler errors that are retried (subclasses too);
            timeouts and stopped agents always are.
        non_retryable: handler errors that fail the step at once, even when
            ``retry_on`` matches them.

    Raises:
        RetryPolicyError: a value is negative or not a number, ``max_attempts``
            is below one, ``max_backoff`` is below ``initial_backoff``,
            ``jitter`` is above one, or the error lists hold no exception classes.
    """

    max_attempts: int = 3
    initial_backoff: float = 0.05
    max_backoff: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.0
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    non_retryable: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        attempts: object = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise RetryPolicyError("RetryPolicy.max_attempts", attempts, "an integer >= 1")
        _number(self, "initial_backoff", minimum=0.0)
        _number(self, "max_backoff", minimum=0.0)
        _number(self, "multiplier", minimum=1.0)
        _number(self, "jitter", minimum=0.0, maximum=1.0)
        if self.max_backoff < self.initial_backoff:
            raise RetryPolicyError(
                "RetryPolicy.max_backoff",
                self.max_backoff,
                f"a number >= initial_backoff ({self.initial_backoff:g})",
            )
        _types(self, "retry_on")
        _types(self, "non_retryable")

    def retries(self, error: BaseException) -> bool:
        """Whether the handler's ``error`` may be retried (attempts aside)."""
        if isinstance(error, self.non_retryable):
            return False
        return isinstance(error, self.retry_on)

    def backoff(self, attempt: int, error: BaseException | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (from one) before the next.

        At least ``error``'s ``retry_after`` hint, when it has one.
        """
        delay = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        if self.jitter:
            delay -= delay * self.jitter * _jitter.random()
        hint = retry_hint(error) if error is not None else None
        return max(delay, hint) if hint is not None else delay
