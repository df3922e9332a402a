"""The sliding minute that ``Limit`` rates count in: shared by the runtime's limiter and stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import collections

__all__ = ["LIMIT_WINDOW", "take_window"]

LIMIT_WINDOW = 60.0
"""Seconds of the sliding window ``per_minute`` and ``tokens_per_minute`` count in."""


def take_window(
    starts: collections.deque[float],
    tokens: collections.deque[tuple[float, float]],
    token_sum: float,
    *,
    per_minute: int | None,
    tokens_per_minute: int | None,
    now: float,
) -> tuple[float, float]:
    """Take one request at ``now`` from the windows: 0.0, or seconds until one may start.

    ``starts`` holds the request times of the last minute, ``tokens`` the
    spends (time, tokens), ``token_sum`` their sum; both drop what is a minute
    old. A request starts (its time is added to ``starts``) while fewer than
    ``per_minute`` started and fewer than ``tokens_per_minute`` tokens were
    spent in the minute before ``now``. Returns that and the new token sum.
    A ``now`` before the newest start (a process that read its clock before
    another took the lock) counts as that start's time: the windows stay in order.
    """
    if starts and now < starts[-1]:
        now = starts[-1]
    horizon = now - LIMIT_WINDOW
    while starts and starts[0] <= horizon:
        starts.popleft()
    while tokens and tokens[0][0] <= horizon:
        token_sum -= tokens.popleft()[1]
    wait = 0.0
    if per_minute is not None and len(starts) >= per_minute:
        wait = starts[len(starts) - per_minute] + LIMIT_WINDOW - now
    if tokens_per_minute is not None and token_sum >= tokens_per_minute and tokens:
        wait = max(wait, tokens[0][0] + LIMIT_WINDOW - now)
    if wait > 0:
        return wait, token_sum
    starts.append(now)
    return 0.0, token_sum
