"""Supervision: what happens when an actor's handler raises.

A :class:`SupervisorPolicy` is configuration only; each running actor keeps its
own :class:`RestartTracker` (the restarts inside the current window).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio

from actorflow.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["Action", "RestartTracker", "SupervisorPolicy"]

Action = Literal["restart", "stop", "escalate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorPolicy:
    """How an actor's supervisor reacts when one of its handlers raises.

    Whatever the action, the failed message leaves no trace: the actor's state
    goes back to what it was after its last successfully handled message, and an
    ``ask`` that sent the message gets :class:`~actorflow.errors.ActorFailedError`.

    Attributes:
        action: ``"restart"`` a fresh instance of the actor (keeping that state),
            ``"stop"`` it, or ``"escalate"`` at once (to the run that spawned
            it, or to the runtime, which then fails).
        max_restarts: restarts allowed within ``within`` seconds; one failure
            more escalates.
        within: length of the restart window, in seconds.
        backoff: delay before the first restart in a window, in seconds; each
            further restart in the window waits ``backoff_factor`` times longer.
        backoff_factor: growth of the delay between consecutive restarts.
        max_backoff: the delay never exceeds this.
        clock: returns the current time in seconds (tests inject a fake one).
        sleep: waits a number of seconds (tests inject one that records delays).
    """

    action: Action = "restart"
    max_restarts: int = 5
    within: float = 60.0
    backoff: float = 0.01
    backoff_factor: float = 2.0
    max_backoff: float = 2.0
    clock: Callable[[], float] = field(default=anyio.current_time, compare=False)
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)

    def __post_init__(self) -> None:
        if self.action not in ("restart", "stop", "escalate"):
            raise ConfigurationError("action", self.action, "'restart', 'stop' or 'escalate'")
        if self.max_restarts < 0:
            raise ConfigurationError("max_restarts", self.max_restarts, "an int >= 0")
        if self.within <= 0:
            raise ConfigurationError("within", self.within, "a number of seconds > 0")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ConfigurationError("backoff", self.backoff, "a number of seconds >= 0")
        if self.backoff_factor < 1:
            raise ConfigurationError("backoff_factor", self.backoff_factor, "a number >= 1")

    @classmethod
    def restart(cls, **options: float | int) -> SupervisorPolicy:
        """A restarting policy (the default); ``options`` as for the constructor."""
        return cls(action="restart", **options)  # type: ignore[arg-type]

    @classmethod
    def stop(cls) -> SupervisorPolicy:
        """Stop the actor on its first failure; pending asks get ActorStoppedError."""
        return cls(action="stop")

    @classmethod
    def escalate(cls) -> SupervisorPolicy:
        """Escalate on the first failure, without restarting."""
        return cls(action="escalate", max_restarts=0)

    def delay(self, restarts_in_window: int) -> float:
        """The backoff before restart number ``restarts_in_window`` (0-based)."""
        return min(self.backoff * self.backoff_factor**restarts_in_window, self.max_backoff)


class RestartTracker:
    """One actor's restarts within its policy's window."""

    __slots__ = ("_times", "policy")

    def __init__(self, policy: SupervisorPolicy) -> None:
        self.policy = policy
        self._times: deque[float] | None = None  # allocated at the first failure

    @property
    def restarts(self) -> int:
        """Restarts counted in the current window."""
        return len(self._times) if self._times is not None else 0

    def decide(self) -> tuple[Action, float]:
        """After a failure: the action to take and, for a restart, its delay.

        A restart is recorded as taken; once the window holds ``max_restarts``
        restarts, the answer is ``"escalate"``.
        """
        policy = self.policy
        if policy.action != "restart":
            return policy.action, 0.0
        now = policy.clock()
        times = self._times
        if times is None:
            times = self._times = deque()
        while times and now - times[0] > policy.within:
            times.popleft()
        if len(times) >= policy.max_restarts:
            return "escalate", 0.0
        delay = policy.delay(len(times))
        times.append(now)
        return "restart", delay
