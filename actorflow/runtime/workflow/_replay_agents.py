"""A replay's agents: placeholders that never run, so a replay executes no agent code.

A replay restores a run's agents as recovery does (their stored states are
decoded, so a state the code can no longer read is found), but each becomes a
``ReplayRef``: an ``ActorRef`` peer of ``LocalRef`` and ``PlacedRef`` behind
which no actor was started (no ``on_start``). Recorded replies are fed back
from the log; anything that would reach the agent live ends the replay
(``HistoryEnd``), as a step with no record does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from actorflow.runtime.actors import ActorRef, MailboxStatistics
from actorflow.runtime.workflow._env import HistoryEnd
from actorflow.runtime.workflow._replay import call_site

if TYPE_CHECKING:
    from actorflow.runtime.actors import Actor, AgentReply, Request

__all__ = ["ReplayPlacer", "ReplayRef", "replay_ref"]

R = TypeVar("R")


class ReplayRef(ActorRef[Any]):
    """A replayed run's agent: its name and class, and no actor behind it."""

    __slots__ = ("_cls", "_name", "_run_id")

    _cls: type[Any]
    _name: str
    _run_id: str

    @property
    def name(self) -> str:
        """The agent's name in its run."""
        return self._name

    @property
    def scope(self) -> str | None:
        """The replayed run's id."""
        return self._run_id

    @property
    def actor_type(self) -> type[Any]:
        """The agent's class (never instantiated)."""
        return self._cls

    @property
    def alive(self) -> bool:
        """Always: a replay never stops an agent."""
        return True

    def mailbox_statistics(self) -> MailboxStatistics:
        """An empty, open mailbox: nothing is ever queued."""
        return MailboxStatistics(current_size=0, max_size=0, waiting_senders=0, closed=False)

    def __hash__(self) -> int:
        return hash((ReplayRef, self._run_id, self._name))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ReplayRef)
            and other._run_id == self._run_id
            and other._name == self._name
        )

    def _live(self) -> NoReturn:
        raise HistoryEnd(f"agent {self._name}", "message", call_site())

    async def send(self, msg: object) -> None:
        """A message to the agent would run it: the replay ends here."""
        self._live()

    def send_nowait(self, msg: object) -> None:
        """A message to the agent would run it: the replay ends here."""
        self._live()

    @overload
    async def ask(self, msg: Request[R], *, timeout: float | None = None) -> R: ...  # noqa: ASYNC109
    @overload
    async def ask(self, msg: object, *, timeout: float | None = None) -> object: ...  # noqa: ASYNC109
    async def ask(self, msg: object, *, timeout: float | None = None) -> object:  # noqa: ASYNC109
        """A message to the agent would run it: the replay ends here."""
        self._live()

    async def deliver(self, msg: object, meta: object | None = None) -> AgentReply:
        """A message to the agent would run it: the replay ends here."""
        self._live()


def replay_ref(cls: type[Actor], run_id: str, name: str) -> ReplayRef:
    """The placeholder of agent ``name`` (of ``cls``) of replayed run ``run_id``."""
    ref: ReplayRef = object.__new__(ReplayRef)
    ref._cls = cls
    ref._name = name
    ref._run_id = run_id
    return ref


class ReplayPlacer:
    """Places every agent of a replayed run nowhere: each gets a ``ReplayRef``."""

    def __init__(self) -> None:
        self.spawned: list[str] = []

    async def spawn(self, cls: type[Actor], *, run_id: str, name: str, state: bytes) -> ReplayRef:
        """A placeholder for agent ``name``; its state was decoded and is not needed further."""
        self.spawned.append(name)
        return replay_ref(cls, run_id, name)

    async def release(self, run_id: str) -> None:
        """Nothing runs, nothing to stop."""
