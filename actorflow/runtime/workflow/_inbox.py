"""The run inbox: every kind of entry that reaches a run from outside, behind one boundary.

A run's inbox (the store's durable, ordered, per-run sequence, see
``actorflow.storage.SupportsInbox``) carries six kinds of entry. This module
owns each one's type tag, its entry-id rule and who may post it, and holds
the one way to post an entry (:func:`post`) and the one way to tell what an
entry is (:func:`classify`):

============  ===========================  ==========================  ======================
kind          type                         entry id                    posted by
============  ===========================  ==========================  ======================
signal        the message type's name      the sender's id, or a uuid  ``runtime.signal``
resume        the response type's name     ``resume:<wait step id>``   ``runtime.resume``
update        ``actorflow.update/<name>``  ``update:<update id>``      ``runtime.update``
reply         ``actorflow.update-reply``   ``reply:<update id>``       the run's owner
cancel        ``actorflow.cancel``         ``actorflow.cancel``        ``runtime.cancel``
child-end     ``actorflow.child/<child>``  the same                    the child's driver
============  ===========================  ==========================  ======================

An entry says its kind in a field of its own (``InboxEntry.kind``) that only
this module sets: a user's signal is a ``signal`` whatever its type name or
id, so it is never read as an update, a reply, a cancel request or a
child's end. The names in the table are actorflow's: a signal whose type
name starts with ``actorflow.``, or whose id starts with one of
:data:`RESERVED_IDS`, is refused before anything is stored
(``ReservedInboxNameError``), so a signal's id never blocks an internal one
either (ids are unique per inbox). Entries posted by actorflow 0.3 and
before carry no kind; they are classified by their type and id, the rule
those versions used.
"""

from __future__ import annotations

import enum
import uuid
from typing import TYPE_CHECKING

import structlog

from actorflow.errors import ReservedInboxNameError, SignalTooLargeError
from actorflow.storage import encode_value, post_message, read_messages

if TYPE_CHECKING:
    from actorflow.storage import InboxEntry, Store

__all__ = [
    "CANCEL_ID",
    "RESERVED_IDS",
    "RESERVED_TYPES",
    "InboxKind",
    "check_signal",
    "child_end_type",
    "classify",
    "encode_message",
    "feeds_wait",
    "find_posted",
    "post",
    "reply_id",
    "resume_target",
    "update_id_of",
    "update_type_of",
    "wait_source",
]

_log = structlog.get_logger("actorflow.inbox")


class InboxKind(enum.Enum):
    """What an inbox entry is; see the module's table."""

    SIGNAL = "signal"
    RESUME = "resume"
    UPDATE = "update"
    REPLY = "reply"
    CANCEL = "cancel"
    CHILD_END = "child-end"


RESERVED_TYPES = "actorflow."
"""Type names starting with this are actorflow's own: no signal may carry one."""

_UPDATE_TYPE = "actorflow.update/"
_REPLY_TYPE = "actorflow.update-reply"
_CANCEL_TYPE = "actorflow.cancel"
_CHILD_END_TYPE = "actorflow.child/"

_UPDATE_ID = "update:"
_REPLY_ID = "reply:"
_RESUME_ID = "resume:"

CANCEL_ID = _CANCEL_TYPE
"""The entry id of a run's cancel request: one per run, a second adds nothing."""

RESERVED_IDS = ("actorflow", _UPDATE_ID, _REPLY_ID, _RESUME_ID)
"""Entry-id prefixes that are actorflow's own: no signal's id may start with one."""


# --- names -------------------------------------------------------------------------


def _type_and_id(kind: InboxKind, name: str, key: str | None) -> tuple[str, str]:
    """The type tag and entry id an entry of ``kind`` is posted under (the module's table)."""
    match kind:
        case InboxKind.SIGNAL:
            return name, key if key is not None else uuid.uuid4().hex
        case InboxKind.RESUME:
            return name, _RESUME_ID + (key or "")
        case InboxKind.UPDATE:
            return _UPDATE_TYPE + name, _UPDATE_ID + (key or uuid.uuid4().hex)
        case InboxKind.REPLY:
            return _REPLY_TYPE, reply_id(key or "")
        case InboxKind.CANCEL:
            return _CANCEL_TYPE, CANCEL_ID
        case InboxKind.CHILD_END:
            tag = child_end_type(name)
            return tag, tag


def reply_id(update_id: str) -> str:
    """The entry id of the reply to update ``update_id``."""
    return _REPLY_ID + update_id


def child_end_type(child_id: str) -> str:
    """The type a child run's end is posted (and waited for) under."""
    return _CHILD_END_TYPE + child_id


def update_id_of(entry: InboxEntry) -> str:
    """The caller's update id of an update or reply entry."""
    return entry.entry_id.removeprefix(_UPDATE_ID).removeprefix(_REPLY_ID)


def update_type_of(entry: InboxEntry) -> str:
    """The registered name of an update entry's message type."""
    return entry.type.removeprefix(_UPDATE_TYPE)


def resume_target(entry: InboxEntry) -> str | None:
    """The wait step a ``resume`` entry answers (None for any other entry)."""
    if classify(entry) is not InboxKind.RESUME:
        return None
    return entry.entry_id.removeprefix(_RESUME_ID)


def check_signal(run_id: str, type_name: str, entry_id: str | None) -> None:
    """Refuse a signal whose type name or id is in actorflow's own namespace.

    Raises:
        ReservedInboxNameError: it is.
    """
    if type_name.startswith(RESERVED_TYPES):
        raise ReservedInboxNameError(run_id, "type name", type_name, RESERVED_TYPES)
    if entry_id is not None:
        for prefix in RESERVED_IDS:
            if entry_id.startswith(prefix):
                raise ReservedInboxNameError(run_id, "id", entry_id, prefix)


# --- the one post ------------------------------------------------------------------


def encode_message(run_id: str, message: object, what: str, limit: int | None) -> bytes:
    """``message`` as MessagePack bytes, refused past ``limit`` bytes.

    Raises:
        EncodingError: it cannot be encoded.
        SignalTooLargeError: it encodes to more than ``limit`` bytes.
    """
    payload = encode_value(message, what, type(message).__qualname__)
    if limit is not None and len(payload) > limit:
        raise SignalTooLargeError(run_id, len(payload), limit)
    return payload


async def post(
    store: Store,
    run_id: str,
    kind: InboxKind,
    *,
    name: str = "",
    key: str | None = None,
    payload: bytes,
    sender: str | None = None,
) -> InboxEntry:
    """Post an entry of ``kind``, durably, under its type tag and entry id (the module's table).

    ``name`` is the type name the tag is made from (the message type's
    registered name; a child's run id for a child's end), ``key`` what the
    id is made from (the signal's id, the update id, the wait step a resume
    answers). A ``signal`` is checked against actorflow's namespace first.

    Raises:
        ReservedInboxNameError: a signal's type name or id is actorflow's.
        RunNotFoundError: no such run.
        InboxUnsupportedError: the store keeps no inbox.
    """
    if kind is InboxKind.SIGNAL:
        check_signal(run_id, name, key)
    type_name, entry_id = _type_and_id(kind, name, key)
    return await post_message(
        store,
        run_id,
        entry_id=entry_id,
        type=type_name,
        payload=payload,
        sender=sender,
        kind=kind.value,
    )


# --- the one classify --------------------------------------------------------------

_KINDS = {kind.value: kind for kind in InboxKind}


def classify(entry: InboxEntry) -> InboxKind | None:
    """What ``entry`` is: by its kind field, or (posted before kinds) by its type and id.

    None for a kind this version does not know (posted by a newer
    actorflow): the entry is left alone.
    """
    if entry.kind:
        return _KINDS.get(entry.kind)
    # 0.3 and before: the rule those versions read their own entries by
    type_name = entry.type
    if type_name.startswith(_UPDATE_TYPE):
        return InboxKind.UPDATE
    if type_name == _REPLY_TYPE:
        return InboxKind.REPLY
    if type_name == _CANCEL_TYPE:
        return InboxKind.CANCEL
    if type_name.startswith(_CHILD_END_TYPE):
        return InboxKind.CHILD_END
    if entry.entry_id.startswith(_RESUME_ID):
        return InboxKind.RESUME
    return InboxKind.SIGNAL


def feeds_wait(
    entry: InboxEntry, kind: InboxKind | None, source: InboxKind, type_name: str
) -> bool:
    """Whether ``entry`` (of ``kind``) is something a wait of ``source`` and ``type_name`` takes.

    Waits for signals take signals and ``resume`` answers of their type;
    waits for a child's end take that child's end only.
    """
    if entry.type != type_name:
        return False
    if source is InboxKind.SIGNAL:
        return kind is InboxKind.SIGNAL or kind is InboxKind.RESUME
    return kind is source


def wait_source(type_name: str) -> InboxKind:
    """The kind of entry a recorded wait of ``type_name`` takes (a child's end, else a signal)."""
    return InboxKind.CHILD_END if type_name.startswith(_CHILD_END_TYPE) else InboxKind.SIGNAL


async def find_posted(
    store: Store, run_id: str, kind: InboxKind, *, name: str = "", key: str
) -> InboxEntry | None:
    """The entry a post of ``kind`` with ``key`` stored, if it is in the inbox (a full read).

    For retries that reach a run after it ended: what was delivered before
    still counts as delivered.
    """
    _, entry_id = _type_and_id(kind, name, key)
    for entry in await read_messages(store, run_id):
        if entry.entry_id == entry_id and classify(entry) is kind:
            return entry
    return None
