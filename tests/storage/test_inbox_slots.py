"""The inbox end search and append loop every store shares, driven by a set of seqs, no store."""

from __future__ import annotations

import math

import pytest

from actorflow.storage._inbox_slots import (
    Create,
    Exists,
    Step,
    append,
    drive,
    drive_async,
    find_end,
    find_start,
    new_entry,
)


class Inbox:
    """The seqs of an inbox's entries, answering steps and counting the checks."""

    def __init__(self, end: int) -> None:
        self.seqs = set(range(end))
        self.checks: list[int] = []
        self.creates: list[int] = []

    def answer(self, step: Step) -> bool:
        if isinstance(step, Exists):
            self.checks.append(step.seq)
            return step.seq in self.seqs
        seq = step.entry.seq
        self.creates.append(seq)
        if seq in self.seqs:
            return False
        self.seqs.add(seq)
        return True

    async def answer_async(self, step: Step) -> bool:
        return self.answer(step)


@pytest.mark.parametrize("end", [0, 1, 2, 3, 4, 5, 7, 8, 9, 1000, 1024, 1025])
def test_the_end_is_the_first_free_seq_in_logarithmic_checks(end: int) -> None:
    inbox = Inbox(end)
    assert drive(find_end(), inbox.answer) == end
    # the probe doubles up past the end, then the binary search halves back to it
    assert len(inbox.checks) <= 2 * math.ceil(math.log2(end + 1)) + 1


def test_an_empty_inbox_is_known_by_one_check() -> None:
    inbox = Inbox(0)
    assert drive(find_end(), inbox.answer) == 0
    assert inbox.checks == [0]


@pytest.mark.parametrize("end", [1, 2, 3, 1000])
def test_a_hint_at_the_end_costs_one_check_of_the_entry_before_it(end: int) -> None:
    inbox = Inbox(end)
    assert drive(find_start(end), inbox.answer) == end
    assert inbox.checks == [end - 1]


def test_a_hint_of_zero_is_taken_unchecked() -> None:
    inbox = Inbox(5)
    assert drive(find_start(0), inbox.answer) == 0  # the appends move on from there
    assert inbox.checks == []


def test_a_hint_short_of_the_end_is_where_the_append_starts() -> None:
    # others posted since: the hint's entry before it exists, so the creates move on
    inbox = Inbox(7)
    assert drive(find_start(5), inbox.answer) == 5
    entry = drive(append(new_entry("e", "T", b"p", None, ""), 5), inbox.answer)
    assert entry.seq == 7
    assert inbox.creates == [5, 6, 7]


@pytest.mark.parametrize(("hint", "end"), [(1, 0), (10, 3), (1001, 1000), (5, 0)])
def test_a_hint_past_the_end_falls_back_to_the_search(hint: int, end: int) -> None:
    # the inbox was deleted with its run and begun anew (stale), or never reached it
    inbox = Inbox(end)
    assert drive(find_start(hint), inbox.answer) == end
    assert inbox.checks[0] == hint - 1


def test_no_hint_searches() -> None:
    inbox = Inbox(3)
    assert drive(find_start(None), inbox.answer) == 3


@pytest.mark.parametrize("end", [0, 1, 2, 3, 1000])
def test_an_append_lands_at_the_end_and_keeps_the_entry(end: int) -> None:
    inbox = Inbox(end)
    posted = new_entry("id-1", "Ping", b"\x90", "tester", "signal")
    entry = drive(append(posted, None), inbox.answer)
    assert entry.seq == end
    assert inbox.creates == [end]
    assert (entry.entry_id, entry.type, entry.payload, entry.sender, entry.kind) == (
        "id-1",
        "Ping",
        b"\x90",
        "tester",
        "signal",
    )
    assert entry.sent == posted.sent
    assert inbox.seqs == set(range(end + 1))  # no gap


def test_an_append_takes_the_next_seq_when_another_poster_took_one_first() -> None:
    inbox = Inbox(2)
    others = 2  # two other posters each link at the end just before a create of ours

    def answer(step: Step) -> bool:
        nonlocal others
        if isinstance(step, Create) and others:
            inbox.seqs.add(step.entry.seq)
            others -= 1
        return inbox.answer(step)

    entry = drive(append(new_entry("e", "T", b"", None, ""), 2), answer)
    assert entry.seq == 4
    assert inbox.creates == [2, 3, 4]


async def test_the_async_driver_asks_the_same_steps() -> None:
    sync, awaited = Inbox(1000), Inbox(1000)
    posted = new_entry("e", "T", b"", None, "")
    assert drive(append(posted, 1001), sync.answer) == (
        await drive_async(append(posted, 1001), awaited.answer_async)
    )
    assert (sync.checks, sync.creates) == (awaited.checks, awaited.creates)
    assert awaited.creates == [1000]
