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
from typing import TYPE_CHECKING, Literal

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import RunNotFoundError
from actorflow.runtime.workflow._inbox import InboxKind, child_end_type, post
from actorflow.runtime.workflow._outcomes import new_manifest, workflow_class
from actorflow.storage import ErrorInfo, RunManifest, RunStatus
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.storage import Store

__all__ = [
    "ChildEnd",
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


class RuntimeChildren:
    """The runtime's ``ChildRuns``: children run in its task group, under its claims.

    Args:
        store: where the runs live.
        owner: the runtime's owner name (the sender of the ends it posts).
        code_version: stored with each new child run.
        drive: creates a child run (``create``) or takes the stored one, and
            drives it here if no one does; returns its manifest if it has
            finished (nobody will post its end), else None.
        cancel: ``Runtime.cancel``.
        tracker: the tracker of a run live in the runtime, if any.
        task_group: the runtime's task group (raises once it stops).
        grace: seconds a child's end gets to be posted as the runtime stops.
    """

    def __init__(
        self,
        *,
        store: Store,
        owner: str,
        code_version: str | None,
        drive: Callable[[type[object], RunManifest, bool], Awaitable[RunManifest | None]],
        cancel: Callable[[str, str], Awaitable[None]],
        tracker: Callable[[str], RunTracker | None],
        task_group: Callable[[], TaskGroup],
        grace: float,
    ) -> None:
        self._store = store
        self._owner = owner
        self._code_version = code_version
        self._drive = drive
        self._cancel = cancel
        self._tracker = tracker
        self._task_group = task_group
        self._grace = grace
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
        manifest = msgspec.structs.replace(
            new_manifest(
                workflow,
                input,
                run_id=child_id,
                owner=self._owner,
                code_version=self._code_version,
            ),
            parent_run=parent_run,
            parent_step=parent_step,
        )
        ended = await self._drive(workflow, manifest, True)
        if ended is not None:
            await post_end(self._store, ended, parent_run, self._owner)

    async def reattach(self, child_id: str, parent_run: str, *, post: bool) -> None:
        """See :meth:`ChildRuns.reattach`."""
        try:
            manifest = await self._store.read_run(child_id)
        except RunNotFoundError:
            if post:  # gone (retention deleted it?): the parent hears so, not nothing
                missing = ErrorInfo(type="RunNotFoundError", message="the child run is gone")
                gone = _gone(child_id, missing)
                await post_end(self._store, gone, parent_run, self._owner)
            return
        ended: RunManifest | None = manifest if manifest.status.finished else None
        if ended is None:
            try:
                ended = await self._drive(workflow_class(manifest), manifest, False)
            except Exception as exc:
                # it stays as it is (for recover()); the parent waits for its end
                _log.warning("child_not_reattached", run_id=child_id, error=describe(exc))
                return
        if ended is not None and post:
            await post_end(self._store, ended, parent_run, self._owner)

    def follow(self, tracker: RunTracker, parent_run: str) -> None:
        """Post the child's end to ``parent_run`` once this runtime's attempt at it finishes it."""
        try:
            task_group = self._task_group()
        except Exception:
            return  # the runtime stops: the parent's re-attach posts it
        task_group.start_soon(self._post_when_ended, tracker, parent_run)

    async def _post_when_ended(self, tracker: RunTracker, parent_run: str) -> None:
        await tracker.ended.wait()
        if not tracker.status.finished:
            return  # paused, interrupted, blocked: whoever finishes it posts
        with anyio.move_on_after(self._grace, shield=True):
            try:
                manifest = await self._store.read_run(tracker.run_id)
                if manifest.status.finished:
                    await post_end(self._store, manifest, parent_run, self._owner)
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
        tracker = self._tracker(parent_run)
        if tracker is None or tracker.done:
            return
        children = self._adopted.get(tracker)
        if children is None:
            try:
                task_group = self._task_group()
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
                await self._cancel(child_id, f"its parent run {tracker.run_id!r} was cancelled")
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
