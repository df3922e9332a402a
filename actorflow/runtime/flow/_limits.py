"""``Limit`` and its limiter: concurrency, requests and tokens per minute, by key.

One :class:`Limiter` per declared key serves every run of a runtime. Its
concurrency slots and sliding windows are exact within the process; on a
store that is :class:`~actorflow.storage.SharedLimits` (the file store) the
request and token windows are the store's, shared by every process using it.
"""

from __future__ import annotations

import collections
import math
import re
import time
from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow.errors import LimitValueError, UnknownLimitError
from actorflow.runtime.flow._clock import SystemClock
from actorflow.storage import LIMIT_WINDOW, take_window

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from actorflow.runtime.flow._clock import Clock
    from actorflow.storage import SharedLimits

__all__ = ["Limit", "LimitStats", "Limiter", "Limiters", "Permit"]

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")  # a key is a file name too

SLOT_POLL = 0.005
"""Seconds before a process looks again for a slot another process holds (then doubling)."""

MAX_SLOT_POLL = 0.1
"""The longest pause between two looks for a slot held in another process."""

TOKENS = "tokens"
"""The counter (``Specialist.report(tokens=...)``) that token budgets count."""


def _rate(limit: Limit, name: str, *, integer: bool) -> None:
    value: object = getattr(limit, name)
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if integer:
        ok = ok and isinstance(value, int)
    if not ok or not 0 < value < math.inf:  # type: ignore[operator]
        kind = "an integer > 0" if integer else "a number > 0"
        raise LimitValueError(f"Limit({limit.name!r}).{name}", value, kind + " or None")


class Limit(msgspec.Struct, frozen=True):
    """A budget several agents share by its name, such as one provider's quota.

    Declared with ``Runtime(limits=[...])``; used by ``@handler(limit="openai")``
    or an agent class's ``limit = "openai"``. Each ask that uses it holds one
    of ``max_concurrent`` slots while its handler runs, and counts as one
    request and as the ``tokens`` its handler reports (``report(tokens=...)``)
    in a sliding window of a minute. Waiting for it is not an attempt and
    does not count toward ``ask_timeout``; a replayed step never takes it.

    Attributes:
        name: the key (letters, digits, ``-``, ``_``, ``.``).
        max_concurrent: handlers running at once (``None``: no cap).
        per_minute: requests started in any sixty seconds (``None``: no cap).
        tokens_per_minute: tokens reported in any sixty seconds; a request
            starts while the window holds fewer (``None``: no cap).

    Raises:
        LimitValueError: a cap is zero, negative or not a number, none is
            given, or the name is not a valid key.
    """

    name: str
    max_concurrent: int | None = None
    per_minute: int | None = None
    tokens_per_minute: int | None = None

    def __post_init__(self) -> None:
        name: object = self.name
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise LimitValueError(
                "Limit.name", name, "1-128 letters, digits, '-', '_' or '.', not starting with '.'"
            )
        _rate(self, "max_concurrent", integer=True)
        _rate(self, "per_minute", integer=True)
        _rate(self, "tokens_per_minute", integer=True)
        if (
            self.max_concurrent is None
            and self.per_minute is None
            and self.tokens_per_minute is None
        ):
            raise LimitValueError(
                f"Limit({self.name!r})",
                None,
                "at least one of max_concurrent, per_minute, tokens_per_minute",
            )


class LimitStats(msgspec.Struct, kw_only=True):
    """What one limiter did so far (``runtime.limit_stats()``).

    Attributes:
        acquired: asks that took the limit.
        waited: of those, how many had to wait.
        wait_seconds: their waits added up, by the runtime's clock.
        longest_wait: the longest of those waits, in seconds.
        queued: asks waiting for it now (the queue length).
        running: asks holding a slot now.

    .. versionchanged:: 0.6
       ``longest_wait``.
    """

    acquired: int = 0
    waited: int = 0
    wait_seconds: float = 0.0
    longest_wait: float = 0.0
    queued: int = 0
    running: int = 0

    @property
    def mean_wait(self) -> float:
        """The mean wait of the asks that waited, in seconds (0.0 if none did)."""
        return self.wait_seconds / self.waited if self.waited else 0.0


class Permit:
    """One ask's hold on a limit: a slot until :meth:`release`, its tokens counted then."""

    __slots__ = ("_limiter", "_released", "_slot", "metrics", "waited")

    def __init__(self, limiter: Limiter, waited: float, slot: object | None = None) -> None:
        self._limiter = limiter
        self._released = False
        self._slot = slot  # the store's slot, when slots are shared between processes
        self.waited = waited
        self.metrics: Mapping[str, float] | None = None
        """Where the handler reports its tokens (the step's metrics), read at release."""

    def release(self) -> None:
        """Give the slot back and count the reported tokens; a second call does nothing."""
        if self._released:
            return
        self._released = True
        metrics = self.metrics
        tokens = metrics.get(TOKENS, 0.0) if metrics else 0.0
        self._limiter.release(tokens, self._slot)

    def on_reply(self, _: object) -> None:
        """``release``, as a reply's ``notify``: the handler is done."""
        self.release()


class Limiter:
    """The runtime's one limiter of a key: slots, a request window and a token window."""

    __slots__ = (
        "_clock",
        "_free",
        "_lock",
        "_now",
        "_plain",
        "_rated",
        "_shared",
        "_slot_waiters",
        "_starts",
        "_token_sum",
        "_tokens",
        "_unsent",
        "limit",
        "on_reply",
        "owes",
        "stats",
    )

    def __init__(self, limit: Limit, clock: Clock, shared: SharedLimits | None = None) -> None:
        self.limit = limit
        self.stats = LimitStats()
        self._clock = clock
        self._shared = shared
        self._free = limit.max_concurrent if limit.max_concurrent is not None else -1
        self._slot_waiters: collections.deque[anyio.Event] = collections.deque()
        self._starts: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, float]] = collections.deque()
        self._token_sum = 0.0
        self._unsent: list[float] = []  # tokens spent, for the shared budget
        self.owes = False
        """Whether released tokens wait to be counted in the shared budget (``settle``)."""
        self._lock: anyio.Lock | None = None  # made in the loop; FIFO among rate waiters
        self._rated = limit.per_minute is not None or limit.tokens_per_minute is not None
        # taken and given back with no permit: nothing shared, no tokens to count at the end
        self._plain = shared is None and limit.tokens_per_minute is None
        self.on_reply = self.give_back
        # the system clock's reading without its Python frame: every rated ask reads it
        self._now = time.time if type(clock) is SystemClock else clock.now
        """:meth:`give_back` bound once: a reply's ``notify`` (made for every ask otherwise)."""

    @property
    def rated(self) -> bool:
        """Whether requests or tokens per minute are capped."""
        return self._rated

    def try_take(self) -> bool:
        """Take a slot and a request now if that needs no wait and leaves nothing to count
        at the end (no shared budget, no token cap); whether it did.

        What it takes is given back by :meth:`give_back`, once; otherwise use
        :meth:`acquire`.
        """
        if (
            not self._plain
            or self._free == 0
            or self._slot_waiters
            or (self._lock is not None and self._lock.locked())
        ):
            return False
        per_minute = self.limit.per_minute
        if per_minute is not None:
            # take_window's rule for requests alone, inline: this is every limited ask's path
            starts = self._starts
            now = self._now()
            if starts:
                if now < starts[-1]:
                    now = starts[-1]
                horizon = now - LIMIT_WINDOW
                while starts and starts[0] <= horizon:
                    starts.popleft()
                if len(starts) >= per_minute:
                    return False  # full: acquire waits for the window
            starts.append(now)
        if self._free > 0:
            self._free -= 1
        stats = self.stats
        stats.acquired += 1
        stats.running += 1
        return True

    def give_back(self, _: object = None) -> None:
        """Give back what :meth:`try_take` took; also a reply's ``notify`` (the handler is done)."""
        self.stats.running -= 1
        if self._free >= 0:
            if self._slot_waiters:
                self._slot_waiters.popleft().set()  # the slot passes straight to the next waiter
            else:
                self._free += 1

    async def acquire(self) -> Permit:
        """Wait for a slot and room in the windows; take them (not an attempt, no timeout)."""
        stats = self.stats
        # the uncontended path: a free slot, no window, nothing shared, no await
        if (
            self._free != 0
            and not self._slot_waiters
            and not self._rated
            and self._shared is None
            and self._lock is None
        ):
            if self._free > 0:
                self._free -= 1
            stats.acquired += 1
            stats.running += 1
            return Permit(self, 0.0)
        clock = self._clock
        if (
            self._shared is None
            and self._free != 0
            and not self._slot_waiters
            and (self._lock is None or not self._lock.locked())
            and self._take_local(clock.now()) <= 0
        ):
            # room in the windows and nobody queued before us: taken without an await
            if self._free > 0:
                self._free -= 1
            stats.acquired += 1
            stats.running += 1
            return Permit(self, 0.0)
        started = clock.now()
        stats.queued += 1
        slot: object | None = None
        try:
            blocked = await self._take_slot()
            try:
                if self._shared is not None and self.limit.max_concurrent is not None:
                    slot, paused = await self._take_shared_slot(
                        self._shared, self.limit.max_concurrent
                    )
                    blocked |= paused
                if self._rated:
                    blocked |= await self._take_rate()
            except BaseException:
                if slot is not None and self._shared is not None:
                    self._shared.release_limit_slot(slot)
                self._give_slot()
                raise
        finally:
            stats.queued -= 1
        # a wait is one that blocked: a trip to a shared store's budget is no wait
        waited = max(clock.now() - started, 0.0) if blocked else 0.0
        stats.acquired += 1
        stats.running += 1
        if blocked:
            stats.waited += 1
            stats.wait_seconds += waited
            stats.longest_wait = max(stats.longest_wait, waited)
        return Permit(self, waited, slot)

    def release(self, tokens: float, slot: object | None = None) -> None:
        """Give a slot back and count ``tokens`` (``Permit.release`` calls it)."""
        self.stats.running -= 1
        if slot is not None and self._shared is not None:
            self._shared.release_limit_slot(slot)
        if tokens > 0 and self.limit.tokens_per_minute is not None:
            now = self._clock.now()
            if self._shared is not None:
                self._unsent.append(tokens)
                self.owes = True
            else:
                self._tokens.append((now, tokens))
                self._token_sum += tokens
        self._give_slot()

    async def settle(self) -> None:
        """Count the tokens released so far in the shared budget (no-op without one)."""
        shared = self._shared
        if shared is None or not self._unsent:
            return
        spent, self._unsent = sum(self._unsent), []
        self.owes = False
        await shared.spend_limit_tokens(self.limit.name, spent, now=self._clock.now())

    async def _take_slot(self) -> bool:
        """Take a slot of this process; whether that meant waiting."""
        if self._free < 0:
            return False
        if self._free > 0 and not self._slot_waiters:
            self._free -= 1
            return False
        event = anyio.Event()
        self._slot_waiters.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():
                self._give_slot()  # handed a slot as it was cancelled: pass it on
            else:
                self._slot_waiters.remove(event)
            raise
        return True

    def _give_slot(self) -> None:
        if self._free < 0:
            return
        if self._slot_waiters:
            self._slot_waiters.popleft().set()  # the slot passes straight to the next waiter
        else:
            self._free += 1

    async def _take_shared_slot(self, shared: SharedLimits, slots: int) -> tuple[object, bool]:
        """Take a slot of the store's; whether that meant waiting."""
        # other processes give slots back unseen: look again, less and less often
        pause = SLOT_POLL
        paused = False
        while True:
            slot = await shared.take_limit_slot(self.limit.name, slots)
            if slot is not None:
                return slot, paused
            await self._clock.sleep(pause)
            paused = True
            pause = min(pause * 2, MAX_SLOT_POLL)

    async def _take_rate(self) -> bool:
        """Take a request from the windows; whether that meant waiting."""
        if self._lock is None:
            self._lock = anyio.Lock()
        shared = self._shared
        blocked = self._lock.locked()
        if shared is not None and not blocked:
            # nobody waits on the window: one try without the lock, queued only if it is full
            await self.settle()
            wait = await shared.take_limit(
                self.limit.name,
                per_minute=self.limit.per_minute,
                tokens_per_minute=self.limit.tokens_per_minute,
                now=self._clock.now(),
            )
            if wait <= 0:
                return False
        async with self._lock:  # one waiter at a time watches the window, the rest queue
            clock = self._clock
            while True:
                if self._shared is not None:
                    await self.settle()
                    wait = await self._shared.take_limit(
                        self.limit.name,
                        per_minute=self.limit.per_minute,
                        tokens_per_minute=self.limit.tokens_per_minute,
                        now=clock.now(),
                    )
                else:
                    wait = self._take_local(clock.now())
                if wait <= 0:
                    return blocked
                await clock.sleep(wait)
                blocked = True

    def _take_local(self, now: float) -> float:
        wait, self._token_sum = take_window(
            self._starts,
            self._tokens,
            self._token_sum,
            per_minute=self.limit.per_minute,
            tokens_per_minute=self.limit.tokens_per_minute,
            now=now,
        )
        return wait


class Limiters:
    """A runtime's declared limits, by name, each with its one limiter."""

    __slots__ = ("__weakref__", "_by_name", "_clock", "_shared")

    def __init__(self, limits: Iterable[Limit], clock: Clock) -> None:
        by_name: dict[str, Limit] = {}
        for limit in limits:
            if not isinstance(limit, Limit):
                raise LimitValueError("Runtime(limits=...)", limit, "Limit objects")
            if limit.name in by_name:
                raise LimitValueError("Runtime(limits=...)", limit.name, "each name once")
            by_name[limit.name] = limit
        self._clock = clock
        self._shared: SharedLimits | None = None
        self._by_name: dict[str, Limit | Limiter] = dict(by_name)

    @property
    def names(self) -> tuple[str, ...]:
        """The declared names, sorted."""
        return tuple(sorted(self._by_name))

    @property
    def declared(self) -> tuple[Limit, ...]:
        """The declared limits, by name."""
        return tuple(
            v.limit if isinstance(v, Limiter) else v for _, v in sorted(self._by_name.items())
        )

    def share(self, store: SharedLimits | None) -> None:
        """Keep the rate windows in ``store`` (set before the first ask takes a limit)."""
        self._shared = store

    def check(self, name: str, used_by: str) -> None:
        """Refuse a name that is not declared.

        Raises:
            UnknownLimitError: ``name`` is not one of the declared limits.
        """
        if name not in self._by_name:
            raise UnknownLimitError(name, used_by, self.names)

    def get(self, name: str, used_by: type) -> Limiter:
        """The limiter of ``name`` for an agent class ``used_by``, made on first use.

        Raises:
            UnknownLimitError: ``name`` is not one of the declared limits.
        """
        found = self._by_name.get(name)
        if found is None:
            raise UnknownLimitError(name, f"agent class {used_by.__qualname__}", self.names)
        if isinstance(found, Limit):
            found = self._by_name[name] = Limiter(found, self._clock, self._shared)
        return found

    def stats(self) -> dict[str, LimitStats]:
        """Each limit's :class:`LimitStats` (zeros for one not used yet)."""
        return {
            name: (v.stats if isinstance(v, Limiter) else LimitStats())
            for name, v in sorted(self._by_name.items())
        }
