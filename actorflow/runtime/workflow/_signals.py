"""Signals: typed messages sent to a run from any process, taken by its waits.

``send_signal`` posts a message to a run's inbox (the store's durable,
ordered, per-run inbox; each kind of entry in it is defined in
``_inbox.py``). ``SignalDesk`` is the live owner's side: the run's
waits register with it in the order they start, and it hands each inbox
entry that no wait has taken to the first registered wait of its type. An
entry counts as taken once a wait's resolution is recorded (the view's
``inbox_taken``, kept in snapshots); until then it is only reserved, and a
wait that is cancelled before recording gives its entry back.

The desk reads the inbox only while a wait needs it: on the first wait it
opens the store's inbox watch (a push on the memory and file stores, a poll
on S3) and reads new entries each time the watch says the inbox changed.
"""

from __future__ import annotations

import collections
import contextlib
import weakref
from typing import TYPE_CHECKING

import anyio
import msgspec
import structlog

from actorflow._text import error_message
from actorflow.errors import RunFinishedError, RunLockedError, StorageError
from actorflow.runtime.workflow._ending import cancelled_unowned
from actorflow.runtime.workflow._inbox import (
    InboxKind,
    check_signal,
    classify,
    encode_message,
    feeds_wait,
    find_posted,
    post,
    resume_target,
    update_id_of,
)
from actorflow.runtime.workflow._wait_records import signal_type
from actorflow.storage import (
    InboxEntry,
    SupportsInbox,
    read_messages,
    watch_messages,
)
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._otel import RunTrace
    from actorflow.storage import Store

__all__ = [
    "PAYLOAD_CACHE",
    "CancelRequest",
    "SignalDesk",
    "Waiter",
    "WatchClock",
    "cancel_stored",
    "request_cancel",
    "send_signal",
]

_log = structlog.get_logger("actorflow.signals")


async def send_signal(
    store: Store,
    run_id: str,
    message: object,
    *,
    entry_id: str | None,
    sender: str | None,
    max_size: int | None = None,
    resumes: str | None = None,
) -> InboxEntry:
    """Post ``message`` to the run's inbox, durably; the run takes it when a wait asks.

    A signal, or with ``resumes`` the answer to that paused wait (``runtime.resume``).
    A retried id that was delivered before the run ended returns its entry.

    Raises:
        RunNotFoundError: no such run.
        RunFinishedError: the run has ended (and does not hold this id).
        ReservedInboxNameError: the type name or id is actorflow's own.
        SignalTooLargeError: ``message`` encodes to more than ``max_size`` bytes.
        EncodingError: ``message`` cannot be encoded.
        InboxUnsupportedError: the store keeps no inbox.
    """
    kind = InboxKind.SIGNAL if resumes is None else InboxKind.RESUME
    key = entry_id if resumes is None else resumes
    name = signal_type(type(message))
    if kind is InboxKind.SIGNAL:
        check_signal(run_id, name, key)
    payload = encode_message(run_id, message, "signal", max_size)
    manifest = await store.read_run(run_id)
    if manifest.status.finished:
        found = None
        if key is not None:
            found = await find_posted(store, run_id, kind, name=name, key=key)
        if found is None:
            what = "a signal" if resumes is None else "a response"
            raise RunFinishedError(run_id, str(manifest.status), what)
        return found
    return await post(store, run_id, kind, name=name, key=key, payload=payload, sender=sender)


class CancelRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A request, kept in the run's inbox, that its owner cancel it."""

    reason: str | None = None


async def request_cancel(
    store: Store, run_id: str, reason: str | None, *, sender: str | None
) -> InboxEntry:
    """Post a durable cancel request to the run's inbox (one per run: a second adds nothing)."""
    payload = encode(CancelRequest(reason=reason), "cancel request")
    return await post(store, run_id, InboxKind.CANCEL, payload=payload, sender=sender)


async def cancel_stored(store: Store, run_id: str, reason: str | None, *, sender: str) -> None:
    """Cancel a run this process does not drive, through the store.

    A run a live process owns gets a durable cancel request its owner takes;
    any other unfinished run is marked cancelled, and the request stays for
    a process that may be recovering it this moment. A finished run is left.

    Raises:
        RunNotFoundError: no such run.
        RunLockedError: a live process owns the run and the store keeps no inbox.
    """
    manifest = await store.read_run(run_id)
    if manifest.status.finished:
        return
    if isinstance(store, SupportsInbox):
        await request_cancel(store, run_id, reason, sender=sender)
        if await store.is_owned(run_id):
            return  # its owner takes the request
    elif await store.is_owned(run_id):
        raise RunLockedError(run_id, manifest.owner)
    await store.update_run(run_id, cancelled_unowned(reason))


WATCH_AFTER = 1.0
"""Seconds into an attempt after which its inbox is watched even with no wait."""

PAYLOAD_CACHE = 4 * 1024 * 1024
"""Bytes of untaken signals' payloads a live run keeps in memory; the rest stay in the store."""


def _step_order(waiter: Waiter) -> tuple[tuple[int, str, int], ...]:
    """A step id as a sort key that puts concurrent waits in step order, whatever ran first.

    ``3/review.1@2/0``: numbers by value, phases by name and occurrence.
    """
    key = []
    for part in waiter.step_id.split("/"):
        if part.isdigit():
            key.append((0, "", int(part)))
        else:
            name, _, rest = part.partition(".")
            n = rest.partition("@")[0]
            key.append((1, name, int(n) if n.isdigit() else 0))
    return tuple(key)


class Waiter:
    """One wait, registered with the desk: what it takes and the entry it got.

    Attributes:
        source: the kind of entry it takes (signals, or a child's end).
    """

    __slots__ = ("accept", "entry", "got", "source", "step_id", "type")

    def __init__(
        self,
        step_id: str,
        type: str,
        accept: Callable[[InboxEntry], bool],
        source: InboxKind = InboxKind.SIGNAL,
    ) -> None:
        self.step_id = step_id
        self.type = type
        self.source = source
        self.accept = accept
        self.entry: InboxEntry | None = None
        self.got = anyio.Event()


class WatchClock:
    """Opens each attempt's inbox watch ``WATCH_AFTER`` seconds in: one task for every run.

    A task per attempt, sleeping that second, cost every run a task, a
    cancel scope and a timer, and most runs end sooner. Every delay is the
    same, so the desks wait in a FIFO, in start order; the task runs while
    the FIFO holds any and ends when it is empty. It holds desks weakly: a
    run that ended is not kept alive for its second.

    Args:
        task_group: where the task runs (the runtime's, cancelled as it stops).
    """

    def __init__(self, task_group: Callable[[], TaskGroup]) -> None:
        self._task_group = task_group
        self._due: collections.deque[tuple[float, weakref.ref[SignalDesk]]] = collections.deque()
        self._running = False

    def schedule(self, desk: SignalDesk) -> None:
        """Open ``desk``'s watch ``WATCH_AFTER`` seconds from now (if it has not stopped)."""
        self._due.append((anyio.current_time() + WATCH_AFTER, weakref.ref(desk)))
        if not self._running:
            self._running = True
            try:
                self._task_group().start_soon(self._run)
            except BaseException:
                self._running = False
                raise

    async def _run(self) -> None:
        try:
            while self._due:
                at, desk = self._due[0]
                delay = at - anyio.current_time()
                if delay > 0:
                    await anyio.sleep(delay)
                    continue
                self._due.popleft()
                found = desk()
                if found is None:
                    continue
                try:
                    found.watch_now()
                except Exception as exc:  # one run's watch never stops the runtime's others
                    _log.warning("inbox_watch_failed", error=error_message(exc))
        finally:
            self._running = False


class SignalDesk:
    """The live owner's view of its run's inbox, handing entries to waits in order.

    It reads the inbox once per attempt, from a cursor, and keeps the
    untaken entries' payloads in memory up to ``PAYLOAD_CACHE`` bytes; past
    that it keeps only where an entry is, and reads it again when a wait
    of its type comes.
    """

    # one desk per attempt: slots keep it small; the watch clock holds it weakly
    __slots__ = (
        "__weakref__",
        "_cached",
        "_cancel_seen",
        "_filling",
        "_next",
        "_on_cancel",
        "_poll_interval",
        "_read_lock",
        "_refused",
        "_replied",
        "_reserved",
        "_run_id",
        "_stopped",
        "_store",
        "_stubs",
        "_taken",
        "_task_group",
        "_unknown",
        "_untaken",
        "_waiters",
        "_wanted",
        "_watching",
        "on_update",
        "trace",
    )

    def __init__(
        self,
        store: Store,
        run_id: str,
        taken: set[int],
        *,
        poll_interval: float,
        task_group: TaskGroup,
        on_cancel: Callable[[str | None], None] | None = None,
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._taken = taken  # the view's: grows as resolutions are recorded
        self._reserved: set[int] = set()
        self._untaken: dict[int, InboxEntry] = {}
        self._cached = 0  # payload bytes held in ``_untaken``
        self._stubs: set[int] = set()  # entries of ``_untaken`` held without their payload
        self._wanted: set[int] = set()  # stubs a wait would take: to be read again
        self._filling = False
        self._next = 0
        self._waiters: list[Waiter] = []
        self._poll_interval = poll_interval
        self._task_group = task_group
        self._watching: anyio.CancelScope | None = None
        self._stopped = False
        self._read_lock = anyio.Lock()
        self._refused: set[int] = set()
        self._unknown: set[int] = set()
        self._replied: set[str] = set()  # update ids whose reply is in the inbox
        self._on_cancel = on_cancel
        self._cancel_seen = False
        #: called with each update in the inbox and whether its reply is there already
        #: (the update runner decides what is new)
        self.on_update: Callable[[InboxEntry, bool], None] | None = None
        #: the attempt's spans and metrics (None: tracing is off)
        self.trace: RunTrace | None = None

    def start(self, clock: WatchClock) -> None:
        """Watch the inbox from ``WATCH_AFTER`` seconds on (or the first wait, if sooner).

        A cancel request from another process is taken once the watch is
        open. Most runs are over sooner, and never pay for a watch (on the
        file store a FIFO made and removed, on S3 polls) they do not use.
        """
        clock.schedule(self)

    def watch_now(self) -> None:
        """Open the inbox watch now, unless it is open or the desk has stopped."""
        self._watch()

    def register(self, waiter: Waiter) -> None:
        """Add a wait (in the order waits start): it gets the first untaken entry of its type."""
        self._waiters.append(waiter)
        self._dispatch()

    def withdraw(self, waiter: Waiter, *, consumed: bool) -> None:
        """Remove a wait; an entry it got but did not record goes back to the others."""
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        entry = waiter.entry
        if entry is not None:
            self._reserved.discard(entry.seq)
            if not consumed and entry.seq not in self._taken:
                self._keep(entry)
                waiter.entry = None
                self._dispatch()

    async def check(self) -> None:
        """Read the inbox once, now, and hand out what is there (reading held-back payloads)."""
        await self._refresh()
        await self._fill()

    async def wait(self, waiter: Waiter) -> None:
        """Wait until ``waiter`` has an entry, watching the inbox meanwhile."""
        if waiter.entry is None:
            self._watch()
            await waiter.got.wait()

    def stop(self) -> None:
        """Stop watching the inbox (the run's attempt is over); let go of the callbacks.

        (The update runner holds the run's objects, which hold this desk: a
        cycle the collector would have to find, once per run.)
        """
        self._stopped = True
        self.on_update = None
        self._on_cancel = None
        if self._watching is not None:
            self._watching.cancel()
            self._watching = None

    @property
    def cached_bytes(self) -> int:
        """Bytes of untaken payloads held in memory (at most ``PAYLOAD_CACHE`` plus one entry)."""
        return self._cached

    # --- reading ------------------------------------------------------------------

    def _watch(self) -> None:
        # stopped: a timer that fired just before the stop must not start a watch
        # nobody would cancel (it would hold the attempt's task group open)
        if self._watching is None and not self._stopped:
            self._watching = scope = anyio.CancelScope()
            self._task_group.start_soon(self._follow, scope)

    async def _follow(self, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                async with watch_messages(
                    self._store, self._run_id, poll_interval=self._poll_interval
                ) as watch:
                    while True:
                        await self._refresh()
                        await watch.changed()
            except StorageError as exc:
                # no watch to be had (a FIFO refused, the store unreachable): the
                # run goes on, and its waits poll
                _log.warning("inbox_watch_failed", run_id=self._run_id, error=error_message(exc))
                while True:
                    await anyio.sleep(self._poll_interval)
                    await self._refresh()

    async def _refresh(self) -> None:
        async with self._read_lock:
            try:
                entries = await read_messages(self._store, self._run_id, self._next)
            except StorageError as exc:
                # the waits wait on; the next change (or poll) reads again
                _log.warning("inbox_unreadable", run_id=self._run_id, error=error_message(exc))
                return
        kinds = [classify(entry) for entry in entries]
        # replies first: an update whose reply is in the inbox has nothing left to post
        for entry, kind in zip(entries, kinds, strict=True):
            if kind is InboxKind.REPLY:
                self._replied.add(update_id_of(entry))
        for entry, kind in zip(entries, kinds, strict=True):
            self._next = max(self._next, entry.seq + 1)
            match kind:
                case InboxKind.UPDATE:
                    # taken or not: a finished update's reply may still have to be posted
                    if self.on_update is not None:
                        self.on_update(entry, update_id_of(entry) in self._replied)
                case InboxKind.CANCEL:
                    self._cancel(entry)
                case InboxKind.REPLY:
                    pass  # for the update's caller
                case None:
                    self._unknown_kind(entry)
                case _:
                    if entry.seq not in self._taken and entry.seq not in self._reserved:
                        self._keep(entry)
        self._dispatch()
        if self.trace is not None:
            self.trace.inbox_depth(len(self._untaken))

    def _keep(self, entry: InboxEntry) -> None:
        """Hold an untaken entry: its payload too while the cache has room."""
        if self._cached + len(entry.payload) > PAYLOAD_CACHE and entry.payload:
            self._untaken[entry.seq] = msgspec.structs.replace(entry, payload=b"")
            self._stubs.add(entry.seq)
        else:
            self._untaken[entry.seq] = entry
            self._cached += len(entry.payload)

    def _drop(self, seq: int) -> InboxEntry:
        entry = self._untaken.pop(seq)
        if seq in self._stubs:
            self._stubs.discard(seq)
            self._wanted.discard(seq)
        else:
            self._cached -= len(entry.payload)
        return entry

    def _dispatch(self) -> None:
        held: set[int] = set()  # waits whose next entry is being read again
        for seq in sorted(self._untaken):
            entry = self._untaken[seq]
            if seq in self._taken:
                self._drop(seq)
                continue
            kind = classify(entry)
            target = resume_target(entry)
            if target is not None and target not in {w.step_id for w in self._waiters}:
                continue  # a response to one paused wait: kept for that wait
            for waiter in sorted(self._waiters, key=_step_order):
                if (
                    id(waiter) in held
                    or waiter.entry is not None
                    or (target is not None and waiter.step_id != target)
                    or not feeds_wait(entry, kind, waiter.source, waiter.type)
                ):
                    continue
                if seq in self._stubs:
                    self._wanted.add(seq)
                    held.add(id(waiter))
                    break
                if self._accepts(waiter, entry):
                    self._drop(seq)
                    self._reserved.add(seq)
                    waiter.entry = entry
                    waiter.got.set()
                    break
        if self._wanted and not self._filling and not self._stopped:
            self._filling = True
            self._task_group.start_soon(self._fill_soon)

    async def _fill_soon(self) -> None:
        try:
            await self._fill()
        finally:
            self._filling = False

    async def _fill(self) -> None:
        """Read again the held-back entries a wait would take, then hand them out."""
        while self._wanted:
            seq = min(self._wanted)
            self._wanted.discard(seq)
            if seq not in self._stubs:
                continue
            try:
                found = await read_messages(self._store, self._run_id, seq, seq + 1)
            except StorageError as exc:
                _log.warning("inbox_unreadable", run_id=self._run_id, error=error_message(exc))
                return  # the next refresh or wait tries again
            if seq in self._stubs and found and found[0].seq == seq:
                self._stubs.discard(seq)
                self._untaken[seq] = found[0]
                self._cached += len(found[0].payload)
            self._dispatch()

    def _unknown_kind(self, entry: InboxEntry) -> None:
        if entry.seq not in self._unknown:
            self._unknown.add(entry.seq)
            _log.warning(
                "inbox_entry_unknown_kind", run_id=self._run_id, seq=entry.seq, kind=entry.kind
            )

    def _cancel(self, entry: InboxEntry) -> None:
        if self._cancel_seen or self._on_cancel is None or entry.seq in self._taken:
            return
        self._cancel_seen = True
        try:
            reason = decode(entry.payload, CancelRequest, "cancel request", str(entry.seq)).reason
        except Exception:
            reason = None  # an unreadable reason still cancels
        _log.info("cancel_requested", run_id=self._run_id, seq=entry.seq, sender=entry.sender)
        self._on_cancel(reason)

    def _accepts(self, waiter: Waiter, entry: InboxEntry) -> bool:
        if waiter.accept(entry):
            return True
        if entry.seq not in self._refused:
            self._refused.add(entry.seq)
            _log.warning(
                "signal_undecodable",
                run_id=self._run_id,
                seq=entry.seq,
                type=entry.type,
                step_id=waiter.step_id,
            )
        return False
