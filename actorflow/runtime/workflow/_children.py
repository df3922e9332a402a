"""Child runs, the runtime's side: creating and driving them, posting their ends.

A child is a run of its own (its own log, snapshots and manifest, whose
``parent_run`` and ``parent_step`` name the run and the step that started
it). Starting it is a step of the parent (``StartChildStep``, kind
``child``, in ``steps/``): the child's manifest is created, and the child
driven in the runtime's task group, before the step is recorded, so a parent
that crashed in between finds the child there and re-attaches to it.

Its end reaches the parent as a signal: whoever drives the child posts a
``ChildEnd`` to the parent's inbox when the child finishes, under the type
and entry id ``actorflow.child/<child id>`` (one post, however often it is
retried). The parent's ``result()`` of the child is the one durable wait
(``steps/``) on that type (``ChildResultStep``), so it is recorded once and
replayed exactly.

Re-attaching (``ChildRuns.reattach``) is what makes a crash anywhere
harmless: a parent that replays its start step, or starts waiting for the
child's end, looks at the child's manifest. A finished child's end is posted
again (it may have been lost: the child's driver died between the child's
end and the post); an orphaned child is driven on here, through the same
claim that ``recover()`` takes, so the two never drive it twice; a child
another live process drives (or a paused one) is left to post its end.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING, Literal, Protocol

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import RunNotFoundError
from actorflow.runtime.workflow._inbox import InboxKind, child_end_type, post
from actorflow.runtime.workflow._outcomes import workflow_class
from actorflow.storage import ErrorInfo, RunManifest, RunStatus
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.storage import Store

__all__ = [
    "ChildEnd",
    "ChildHost",
    "OnParentCancel",
    "RuntimeChildren",
    "child_run_id",
    "child_signal",
    "post_end",
]

_log = get_logger("actorflow.children")


OnParentCancel = Literal["cancel", "abandon"]
"""What a child run does when its parent run ends cancelled: be cancelled too, or go on."""

_MAX_RUN_ID = 128
_SAFE_STEP = re.compile(r"[A-Za-z0-9_./@]+")


def child_signal(child_id: str) -> str:
    """The signal type, and the inbox entry id, of child ``child_id``'s end (see ``_inbox.py``)."""
    return child_end_type(child_id)


def child_run_id(parent_run: str, step_id: str) -> str:
    """The id of the child run that step ``step_id`` of ``parent_run`` starts.

    Readable when it fits (``<parent>.child-<step>``, the step id's ``/`` as
    ``-`` and ``@`` as ``-a``, which no step id holds otherwise); else (a
    long parent id, an unusual phase name) ``<parent, cut>.child-<hash>``.
    Either way a valid run id (``validate_run_id``), the same on every replay.
    """
    if _SAFE_STEP.fullmatch(step_id) and ".." not in step_id:
        readable = f"{parent_run}.child-{step_id.replace('/', '-').replace('@', '-a')}"
        if len(readable) <= _MAX_RUN_ID and ".." not in readable:
            return readable
    digest = hashlib.blake2b(f"{parent_run}/{step_id}".encode(), digest_size=12).hexdigest()
    return f"{parent_run[:64].rstrip('.')}.child-{digest}"


class ChildEnd(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a child run ended, as the signal to its parent holds it.

    Attributes:
        child: the child's run id.
        status: completed, failed or cancelled.
        result: a completed child's result (MessagePack bytes).
        error: a failed child's error.
    """

    child: str
    status: RunStatus
    result: bytes | None = None
    error: ErrorInfo | None = None


async def post_end(store: Store, manifest: RunManifest, parent_run: str, sender: str) -> None:
    """Post a finished child's end to ``parent_run``'s inbox; a repeat adds nothing."""
    end = ChildEnd(
        child=manifest.run_id, status=manifest.status, result=manifest.result, error=manifest.error
    )
    payload = encode(end, "end of child run", manifest.run_id)
    await post(
        store, parent_run, InboxKind.CHILD_END, name=manifest.run_id, payload=payload, sender=sender
    )


class ChildHost(Protocol):
    """What child runs ask of the runtime's runs (``Runs``, in ``_runs.py``)."""

    @property
    def store(self) -> Store:
        """Where the runs live."""
        ...

    @property
    def owner(self) -> str:
        """The runtime's owner name (the sender of the ends it posts)."""
        ...

    @property
    def shutdown_timeout(self) -> float:
        """Seconds a child's end gets to be posted as the runtime stops."""
        ...

    async def start_child(
        self,
        workflow: type[object],
        input: object,
        *,
        child_id: str,
        parent_run: str,
        parent_step: str,
    ) -> RunManifest | None:
        """Create the child run and drive it here, or take the stored one.

        Returns its manifest if it has finished (nobody will post its end), else None.

        Raises:
            RunInputMismatchError: the child exists with another input.
        """
        ...

    async def drive_child(self, workflow: type[object], stored: RunManifest) -> RunManifest | None:
        """Drive a stored child here if no one does; its manifest if it has finished."""
        ...

    async def cancel(self, run_id: str, reason: str | None) -> None:
        """``Runtime.cancel``."""
        ...

    def tracker(self, run_id: str) -> RunTracker | None:
        """The tracker of a run the runtime has, if any."""
        ...

    def accepting(self) -> TaskGroup:
        """The runtime's task group.

        Raises:
            RuntimeNotRunningError: it is not running, or stops.
        """
        ...


class RuntimeChildren:
    """The runtime's ``ChildRuns``: children run in its task group, under its claims.

    Args:
        runs: the runtime's runs, which create, take and drive the children
            (and cancel them, and say which runs are live here).
    """

    def __init__(self, runs: ChildHost) -> None:
        self._runs = runs
        self._adopted: dict[RunTracker, set[str]] = {}

    async def start(
        self,
        workflow: type[object],
        input: object,
        *,
        child_id: str,
        parent_run: str,
        parent_step: str,
    ) -> None:
        """See :meth:`ChildRuns.start`."""
        runs = self._runs
        ended = await runs.start_child(
            workflow, input, child_id=child_id, parent_run=parent_run, parent_step=parent_step
        )
        if ended is not None:
            await post_end(runs.store, ended, parent_run, runs.owner)

    async def reattach(self, child_id: str, parent_run: str, *, post: bool) -> None:
        """See :meth:`ChildRuns.reattach`."""
        try:
            manifest = await self._runs.store.read_run(child_id)
        except RunNotFoundError:
            if post:  # gone (retention deleted it?): the parent hears so, not nothing
                missing = ErrorInfo(type="RunNotFoundError", message="the child run is gone")
                gone = _gone(child_id, missing)
                await post_end(self._runs.store, gone, parent_run, self._runs.owner)
            return
        ended: RunManifest | None = manifest if manifest.status.finished else None
        if ended is None:
            try:
                ended = await self._runs.drive_child(workflow_class(manifest), manifest)
            except Exception as exc:
                # it stays as it is (for recover()); the parent waits for its end
                _log.warning("child_not_reattached", run_id=child_id, error=describe(exc))
                return
        if ended is not None and post:
            await post_end(self._runs.store, ended, parent_run, self._runs.owner)

    def follow(self, tracker: RunTracker, parent_run: str) -> None:
        """Post the child's end to ``parent_run`` once this runtime's attempt at it finishes it."""
        try:
            task_group = self._runs.accepting()
        except Exception:
            return  # the runtime stops: the parent's re-attach posts it
        task_group.start_soon(self._post_when_ended, tracker, parent_run)

    async def _post_when_ended(self, tracker: RunTracker, parent_run: str) -> None:
        await tracker.ended.wait()
        if not tracker.status.finished:
            return  # paused, interrupted, blocked: whoever finishes it posts
        with anyio.move_on_after(self._runs.shutdown_timeout, shield=True):
            try:
                manifest = await self._runs.store.read_run(tracker.run_id)
                if manifest.status.finished:
                    await post_end(self._runs.store, manifest, parent_run, self._runs.owner)
            except Exception as exc:
                # the parent's re-attach posts it when it looks for the child
                _log.warning(
                    "child_end_not_posted",
                    run_id=tracker.run_id,
                    parent_run=parent_run,
                    error=describe(exc),
                )

    def adopt(self, parent_run: str, child_id: str) -> None:
        """See :meth:`ChildRuns.adopt`."""
        tracker = self._runs.tracker(parent_run)
        if tracker is None or tracker.done:
            return
        children = self._adopted.get(tracker)
        if children is None:
            try:
                task_group = self._runs.accepting()
            except Exception:
                return
            children = self._adopted[tracker] = set()
            task_group.start_soon(self._cancel_with, tracker, children)
        children.add(child_id)

    async def _cancel_with(self, tracker: RunTracker, children: set[str]) -> None:
        try:
            await tracker.ended.wait()
        finally:
            self._adopted.pop(tracker, None)
        if tracker.status is not RunStatus.CANCELLED:
            return
        for child_id in sorted(children):
            try:
                # a child another process drives gets a durable cancel request
                await self._runs.cancel(
                    child_id, f"its parent run {tracker.run_id!r} was cancelled"
                )
            except Exception as exc:
                _log.warning(
                    "child_not_cancelled",
                    run_id=child_id,
                    parent_run=tracker.run_id,
                    error=describe(exc),
                )
            else:
                _log.info("child_cancelled", run_id=child_id, parent_run=tracker.run_id)


def _gone(child_id: str, error: ErrorInfo) -> RunManifest:
    """A stand-in manifest for a child run that is not in the store (for its end signal)."""
    return RunManifest(
        run_id=child_id,
        workflow="",
        input=b"",
        input_hash="",
        status=RunStatus.FAILED,
        error=error,
        updated=time.time(),
    )
