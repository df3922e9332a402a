"""Step ids, issued synchronously as paths, and the argument hashes replay checks.

A step id is ``<namespace>/<counter>``. The top-level namespace is empty, so a
run's first steps are ``0``, ``1``...; a phase opens ``<parent>/<name>.<n>``
(its ``n``-th call in the parent) and a retried phase ``...@<attempt>``.
Because an id is issued by the call that creates the step, before any task
runs, concurrent steps and phases get the same ids on every run, whichever
order the event loop starts them in.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from typing import Any

from actorflow._text import error_message
from actorflow.errors import EncodingError
from actorflow.storage import ENCODE_ERRORS, encoder

__all__ = [
    "Namespace",
    "args_hash",
    "current_namespace",
    "enter_namespace",
    "leave_namespace",
    "message_digest",
    "phase_of",
    "value_hash",
]


class Namespace:
    """Counters of one phase attempt (or of the run's top level)."""

    __slots__ = ("_counter", "_occurrences", "failed_sends", "path", "pending", "sends")

    def __init__(self, path: str) -> None:
        self.path = path
        self._counter = 0
        self._occurrences: dict[str, int] = {}
        # steps issued here and not yet awaited, by id, for the end-of-phase check
        self.pending: dict[str, object] = {}
        # `ctx.send`s whose handling is still being recorded, and their failures:
        # the phase ends only when every one is recorded
        self.sends: list[Any] = []
        self.failed_sends: list[BaseException] = []

    def next_step(self) -> str:
        """Issue the next step id in this namespace."""
        n = self._counter
        self._counter = n + 1
        return f"{self.path}/{n}" if self.path else str(n)

    def peek_step(self) -> str:
        """The id ``next_step`` would issue, without issuing it."""
        n = self._counter
        return f"{self.path}/{n}" if self.path else str(n)

    def next_phase(self, name: str) -> str:
        """Issue the id of the next call of phase ``name`` in this namespace."""
        n = self._occurrences.get(name, 0)
        self._occurrences[name] = n + 1
        return f"{self.path}/{name}.{n}" if self.path else f"{name}.{n}"


def phase_of(step_id: str) -> str | None:
    """The name of the innermost phase a recorded step id belongs to; None at the top level.

    The inverse of :meth:`Namespace.next_phase`: ``draft.0/review.1@2/3`` is
    step 3 of the third attempt of the second ``review`` inside ``draft``.
    Tools read a run's current phase from its newest log records this way.

    .. versionadded:: 0.2
    """
    path, slash, _counter = step_id.rpartition("/")
    if not slash:
        return None
    innermost = path.rpartition("/")[2].partition("@")[0]
    name, dot, _n = innermost.rpartition(".")
    return name if dot else None


# the namespace of the phase the running code is in (None: the run's top level)
_namespace: ContextVar[Namespace | None] = ContextVar("actorflow_namespace", default=None)


def current_namespace(root: Namespace) -> Namespace:
    """The namespace of the phase the caller runs in, or ``root`` outside any phase."""
    ns = _namespace.get()
    return ns if ns is not None else root


def enter_namespace(ns: Namespace) -> object:
    """Make ``ns`` the caller's namespace; pass the token to ``leave_namespace``."""
    return _namespace.set(ns)


def leave_namespace(token: object) -> None:
    """Go back to the namespace before ``enter_namespace`` returned ``token``."""
    _namespace.reset(token)  # type: ignore[arg-type]


def args_hash(kind: str, target: str | None, payload: bytes) -> str:
    """A short digest of what a step was asked to do, checked on replay."""
    h = hashlib.blake2b(payload, digest_size=12)
    h.update(kind.encode())
    if target is not None:
        h.update(target.encode())
    return h.hexdigest()


_encode_message = encoder.encode
_blake2b = hashlib.blake2b
# (message class, kind, target) -> the bytes hashed after the message's own;
# bounded: agent names can be as many as runs
_suffixes: dict[tuple[type, str, str], bytes] = {}


def message_digest(kind: str, target: str, message: object) -> tuple[str, bytes]:
    """``args_hash`` of a message step, and the message's MessagePack (a live step keeps it).

    The digest hashes the message's MessagePack, class name, kind and target:
    the same as ``args_hash(kind, target, payload + qualname)``, with the
    constant tail cached: every step, live or replayed, pays for this.
    """
    cls = type(message)
    try:
        payload = _encode_message(message)
    except ENCODE_ERRORS as exc:
        raise EncodingError(f"message {cls.__qualname__}", error_message(exc)) from exc
    key = (cls, kind, target)
    suffix = _suffixes.get(key)
    if suffix is None:
        if len(_suffixes) >= 4096:
            _suffixes.clear()
        suffix = _suffixes[key] = cls.__qualname__.encode() + kind.encode() + target.encode()
    return _blake2b(payload + suffix, digest_size=12).hexdigest(), payload


_value_hashes: dict[str, str] = {}


def value_hash(kind: str) -> str:
    """``args_hash`` of a value step (``now``, ``random``...), which has no arguments."""
    digest = _value_hashes.get(kind)
    if digest is None:
        digest = _value_hashes[kind] = args_hash(kind, None, b"")
    return digest
