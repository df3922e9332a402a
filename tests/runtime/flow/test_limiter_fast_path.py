"""The limiter's fast path (``try_take``, taken without an await) keeps the same window as
``take_window``, and its slots as ``acquire``'s."""

from __future__ import annotations

import collections
import random

from actorflow import Limit
from actorflow.runtime.flow import Limiter
from actorflow.storage import take_window
from actorflow.testing import FakeClock


def test_try_take_grants_what_the_window_grants() -> None:
    rng = random.Random(26)
    clock = FakeClock(1_000.0)
    limiter = Limiter(Limit("k", per_minute=3), clock)
    starts: collections.deque[float] = collections.deque()
    for _ in range(500):
        clock.advance(rng.choice([0.0, 0.0, 1.0, 10.0, 30.0, 61.0]))
        expected, _ = take_window(
            starts, collections.deque(), 0.0, per_minute=3, tokens_per_minute=None, now=clock.now()
        )
        taken = limiter.try_take()
        assert taken is (expected <= 0)
        if taken:
            limiter.give_back()
    assert limiter.stats.running == 0


def test_try_take_holds_the_cap_and_gives_slots_back() -> None:
    limiter = Limiter(Limit("k", max_concurrent=2), FakeClock())
    assert limiter.try_take()
    assert limiter.try_take()
    assert not limiter.try_take()  # both slots held
    assert limiter.stats.running == 2
    limiter.give_back(None)  # as a reply's notify
    assert limiter.try_take()
    assert limiter.stats.acquired == 3


def test_a_shared_or_token_limit_has_no_fast_path() -> None:
    assert not Limiter(Limit("k", tokens_per_minute=10), FakeClock()).try_take()
