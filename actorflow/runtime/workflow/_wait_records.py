"""What a wait records: its request when it starts, its resolution when it ends.

A wait (``ctx.wait_for``, ``ctx.wait_for_input``) leaves two records in the
run's log. When it starts, an ``EventRecord`` of kind ``<wait>_requested``
holds a :class:`WaitRequest` (the signal type it takes, its deadline, its
prompt). When it resolves, a ``StepRecord`` of kind ``<wait>`` holds a
:class:`WaitResolution`: the inbox entry it took, payload included, or the
timeout. Replay returns the resolution and never takes another entry.

Readers that do not run the workflow (``query``, ``recover`` looking at paused
runs, the CLI) read waits through :func:`pending_waits`. Runs recorded by
releases before 0.3 stored the prompt and the answer as bare values; both
are still read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from actorflow.runtime.actors import class_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    from actorflow.storage import EventRecord, StepRecord

__all__ = [
    "TAKING_KINDS",
    "WAIT_KINDS",
    "PendingWait",
    "WaitRequest",
    "WaitResolution",
    "pending_waits",
    "read_request",
    "read_resolution",
    "signal_type",
    "taken_seq",
]

#: Step kinds that are waits: ``ctx.wait_for`` and ``ctx.wait_for_input``.
WAIT_KINDS = frozenset({"wait", "input"})

#: Step kinds whose record takes an inbox entry (its ``seq``): waits and updates.
TAKING_KINDS = WAIT_KINDS | {"update"}

_REQUESTED = "_requested"


class WaitRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A wait as it started: the signal type it takes, until when, and why.

    Attributes:
        type: the signal type name it takes (see :func:`signal_type`).
        deadline: when it stops waiting (``time.time()``), or None for never.
        timeout: the timeout it was given, in seconds (for messages).
        prompt: what it asks a human, for ``wait_for_input`` and displays.
        pause: whether the run pauses (ends its tasks) while it waits.
    """

    type: str
    deadline: float | None = None
    timeout: float | None = None
    prompt: str | None = None
    pause: bool = False


class WaitResolution(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a wait ended: the inbox entry it took, or its deadline passing.

    Attributes:
        seq: the taken entry's place in the inbox; None when it timed out.
        entry_id: the taken entry's id.
        payload: the message's MessagePack bytes.
        sender: who sent it, if they said.
        sent: when it was sent.
    """

    seq: int | None = None
    entry_id: str | None = None
    payload: bytes | None = None
    sender: str | None = None
    sent: float | None = None

    @property
    def timed_out(self) -> bool:
        """Whether the wait ended at its deadline, with no message."""
        return self.seq is None


class PendingWait(msgspec.Struct, frozen=True, kw_only=True):
    """A wait that started and has not resolved, as a reader of the run sees it.

    Attributes:
        step_id: the wait's step id in the run.
        kind: ``wait`` (``ctx.wait_for``) or ``input`` (``ctx.wait_for_input``).
        type: the signal type name it takes (``str`` for ``wait_for_input``).
        deadline: when it stops waiting (``time.time()``), or None for never.
        prompt: what it asks a human, if anything.
        pause: whether the run pauses (ends its tasks) while it waits.

    .. versionadded:: 0.3
    """

    step_id: str
    kind: str
    type: str
    deadline: float | None = None
    prompt: str | None = None
    pause: bool = False


_request_decoder = msgspec.msgpack.Decoder(WaitRequest)
_resolution_decoder = msgspec.msgpack.Decoder(WaitResolution)


def signal_type(cls: type[Any]) -> str:
    """The name a signal of type ``cls`` is posted and waited for under.

    A class's stable name (its ``__actorflow_name__``, else its qualified
    name), so a sender and the run agree whatever module they import it from.
    """
    return class_name(cls)


def read_request(kind: str, data: bytes) -> WaitRequest:
    """The request a ``<kind>_requested`` event holds (a bare prompt, before 0.3)."""
    try:
        return _request_decoder.decode(data)
    except msgspec.DecodeError:
        if kind == "input":  # 0.2 stored the prompt's UTF-8 bytes
            return WaitRequest(type="str", prompt=data.decode(errors="replace"), pause=True)
        raise


def read_resolution(record: StepRecord) -> WaitResolution:
    """The resolution a wait's step record holds (a bare answer, before 0.3)."""
    data = record.result or b"\xc0"
    try:
        return _resolution_decoder.decode(data)
    except msgspec.DecodeError:
        if record.kind == "input":  # 0.2 stored the answer itself
            return WaitResolution(payload=data)
        raise


class _Taken(msgspec.Struct):
    seq: int | None = None


_taken_decoder = msgspec.msgpack.Decoder(_Taken)


def taken_seq(record: StepRecord) -> int | None:
    """The inbox ``seq`` a wait's or an update's record took, if it took one."""
    if record.kind not in TAKING_KINDS or record.error is not None or record.result is None:
        return None
    try:
        return _taken_decoder.decode(record.result).seq
    except msgspec.DecodeError:
        return None  # a bare answer of 0.2: it took no entry


def pending_waits(
    events: Mapping[str, EventRecord], steps: Mapping[str, StepRecord]
) -> list[PendingWait]:
    """The waits that started (an event) and have no resolution (no step record), in log order."""
    found = []
    for event in events.values():
        kind = event.kind.removesuffix(_REQUESTED)
        step_id = event.step_id
        if kind == event.kind or kind not in WAIT_KINDS or step_id is None or step_id in steps:
            continue
        try:
            request = read_request(kind, event.data or b"")
        except msgspec.DecodeError:
            continue
        found.append(
            PendingWait(
                step_id=step_id,
                kind=kind,
                type=request.type,
                deadline=request.deadline,
                prompt=request.prompt,
                pause=request.pause,
            )
        )
    return found
