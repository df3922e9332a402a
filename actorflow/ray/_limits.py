"""Limits on a Ray cluster: one budget actor per limit key, shared by every host.

``actorflow-limit.<key>`` is a named, detached Ray actor of the namespace
(:class:`LimitBudget`, asyncio inside Ray): it holds the key's sliding
minute (request starts, token spends) and its concurrency slots, and, being
one actor, serves its callers one call at a time. Each host's runtime reaches
it through :class:`RayLimits`, its ``SharedLimits``: a ``Limit`` holds across
every host of the cluster, whichever node they are on.

A slot names its holder: the host's Ray actor and a token of the process
that took it. When every slot is held, the budget asks the holders (at most
once per :data:`PROBE_INTERVAL`) whether they still hold their token: a dead
holder's slots, or those of a host Ray restarted, are freed. A budget actor
lost with its node is restarted by Ray elsewhere, empty: that minute is
forgotten (as a file store's budget on a power loss).
"""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio
import ray
from ray.exceptions import RayActorError

from actorflow.ray._bridge import wait_ref
from actorflow.storage import take_window

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from actorflow.ray._handles import RemoteMethod

__all__ = ["BUDGET_PREFIX", "PROBE_INTERVAL", "LimitBudget", "RayLimits"]

BUDGET_PREFIX = "actorflow-limit."
"""The budget actors' names: this and the limit's key."""

PROBE_INTERVAL = 1.0
"""Seconds between two looks of a full budget at whether its slots' holders live."""

PROBE_TIMEOUT = 5.0
"""Seconds a holder has to answer a look; one that does not is taken to live (busy)."""


class LimitBudget:
    """The Ray actor of one limit key's budget (decorated with ``ray.remote`` where started)."""

    def __init__(self) -> None:
        self._starts: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, float]] = collections.deque()
        self._token_sum = 0.0
        self._held: dict[int, tuple[str, Any]] = {}  # slot -> (holder's token, its actor)
        self._next = 0
        self._probed = -PROBE_INTERVAL
        self._probing: asyncio.Lock | None = None

    async def take(
        self, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> float:
        """Take one request at ``now``: 0.0, or the seconds to wait (nothing taken then)."""
        wait, self._token_sum = take_window(
            self._starts,
            self._tokens,
            self._token_sum,
            per_minute=per_minute,
            tokens_per_minute=tokens_per_minute,
            now=now,
        )
        return wait

    async def spend(self, tokens: float, now: float) -> None:
        """Count ``tokens`` spent at ``now``."""
        self._tokens.append((now, tokens))
        self._token_sum += tokens

    async def take_slot(self, slots: int, token: str, holder: Any) -> int | None:
        """Hold one of ``slots`` for ``holder`` (an actor handle or None): its number, or None."""
        if len(self._held) >= slots:
            await self._drop_dead()
        if len(self._held) >= slots:
            return None
        slot = self._next
        self._next += 1
        self._held[slot] = (token, holder)
        return slot

    async def release_slot(self, slot: int) -> None:
        """Give ``slot`` back (idempotent)."""
        self._held.pop(slot, None)

    async def held(self) -> int:
        """How many slots are held now."""
        return len(self._held)

    async def _drop_dead(self) -> None:
        """Free the slots of holders that died or were restarted since they took them."""
        if time.monotonic() - self._probed < PROBE_INTERVAL:
            return
        if self._probing is None:
            self._probing = asyncio.Lock()
        if self._probing.locked():
            return  # another call looks already
        async with self._probing:
            self._probed = time.monotonic()
            holders: dict[str, Any] = {}  # a token names one process
            for token, holder in self._held.values():
                if holder is not None:  # else taken outside an actor: held until given back
                    holders[token] = holder
            for token, holder in holders.items():
                if not await _holds(holder, token):
                    for slot in [s for s, (t, _) in self._held.items() if t == token]:
                        del self._held[slot]


async def _holds(holder: Any, token: str) -> bool:
    """Whether ``holder`` lives and holds ``token`` (one that does not answer in time does)."""
    try:
        held: bool = await asyncio.wait_for(
            holder.holds_limit_token.remote(token), timeout=PROBE_TIMEOUT
        )
    except RayActorError:
        return False  # dead, and not coming back as the same process
    except TimeoutError:
        return True
    return held


class _BudgetHandle(Protocol):
    """A handle to a :class:`LimitBudget` Ray actor."""

    @property
    def take(self) -> RemoteMethod[[int | None, int | None, float], float]: ...

    @property
    def spend(self) -> RemoteMethod[[float, float], None]: ...

    @property
    def take_slot(self) -> RemoteMethod[[int, str, Any], int | None]: ...

    @property
    def release_slot(self) -> RemoteMethod[[int], None]: ...

    @property
    def held(self) -> RemoteMethod[[], int]: ...


class _Slot:
    """One slot of a budget, as :meth:`RayLimits.take_limit_slot` hands it out."""

    __slots__ = ("budget", "number")

    def __init__(self, budget: _BudgetHandle, number: int) -> None:
        self.budget = budget
        self.number = number


_ACTOR: Any = None


class RayLimits:
    """``SharedLimits`` kept by one :class:`LimitBudget` actor per key in a Ray namespace.

    Args:
        namespace: the Ray namespace of the budget actors (the hosts').
        holder: the Ray actor whose slots these are (a host), asked by a full
            budget whether it still lives; ``None`` outside an actor (slots
            are then held until given back).
    """

    def __init__(self, namespace: str, holder: ActorHandle[Any] | None = None) -> None:
        self.namespace = namespace
        self.token = uuid.uuid4().hex
        """This process's mark on the slots it holds."""
        self._holder = holder
        self._budgets: dict[str, _BudgetHandle] = {}

    async def take_limit(
        self, key: str, *, per_minute: int | None, tokens_per_minute: int | None, now: float
    ) -> float:
        """See :meth:`~actorflow.storage.SharedLimits.take_limit`: the key's budget actor."""
        budget = await self._budget(key)
        return await wait_ref(budget.take.remote(per_minute, tokens_per_minute, now))

    async def spend_limit_tokens(self, key: str, tokens: float, *, now: float) -> None:
        """See :meth:`~actorflow.storage.SharedLimits.spend_limit_tokens`."""
        budget = await self._budget(key)
        await wait_ref(budget.spend.remote(tokens, now))

    async def take_limit_slot(self, key: str, slots: int) -> object | None:
        """See :meth:`~actorflow.storage.SharedLimits.take_limit_slot`."""
        budget = await self._budget(key)
        number = await wait_ref(budget.take_slot.remote(slots, self.token, self._holder))
        return _Slot(budget, number) if number is not None else None

    def release_limit_slot(self, handle: object) -> None:
        """See :meth:`~actorflow.storage.SharedLimits.release_limit_slot`: sent, not awaited."""
        assert isinstance(handle, _Slot)
        handle.budget.release_slot.remote(handle.number)

    async def held_slots(self, key: str) -> int:
        """How many of ``key``'s slots are held in the cluster now."""
        budget = await self._budget(key)
        return await wait_ref(budget.held.remote())

    async def _budget(self, key: str) -> _BudgetHandle:
        budget = self._budgets.get(key)
        if budget is None:
            # get_if_exists asks Ray's control store: a blocking call, once per key
            budget = await anyio.to_thread.run_sync(self._find_or_start, key)
            self._budgets[key] = budget
        return budget

    def _find_or_start(self, key: str) -> _BudgetHandle:
        global _ACTOR  # decorated once, where Ray is there
        if _ACTOR is None:
            _ACTOR = ray.remote(LimitBudget)
        handle = _ACTOR.options(
            name=BUDGET_PREFIX + key,
            namespace=self.namespace,
            get_if_exists=True,
            lifetime="detached",  # the budget outlives the host that made it
            max_restarts=-1,  # lost with its node: back elsewhere (empty)
            max_task_retries=3,  # a call in flight then goes to the new one
            num_cpus=0,
            max_concurrency=1000,
        ).remote()
        return cast("_BudgetHandle", handle)
