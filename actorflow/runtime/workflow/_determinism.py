"""The determinism guard: orchestrator code calling the clock, randomness or sleep outside ``ctx``.

A re-run after a crash replays the orchestrator from the top; a value it
took from ``time.time()`` or ``random.random()`` comes out different and the
run diverges from its log, or worse, silently takes another branch. While an
orchestrator runs, the functions in :data:`GUARDED` are replaced on their
modules by wrappers that look at their caller: a call from the user's own
code (not the standard library, not an installed package, not actorflow) that
is not inside an agent's handler is reported, once per call site, as a
``nondeterministic_call`` warning naming the ``ctx`` call to use instead
(``warn``, the default), or raised as ``NondeterministicCallError``
(``strict``: ``actorflow.testing`` and the replayer). Agents run live and
are never judged.

The wrappers are in place only while at least one guarded orchestrator
runs, and cost a call plus a context-variable read until one does something
to report. What patching cannot see: a name bound before the run started
(``from time import time``), and methods of C types (``datetime.now()``).
"""

from __future__ import annotations

import enum
import functools
import os
import random
import secrets
import sys
import sysconfig
import threading
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio

from actorflow._log import get_logger
from actorflow.errors import NondeterministicCallError
from actorflow.runtime.actors import actor_task_code

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import CodeType, FrameType, ModuleType

__all__ = ["GUARDED", "Determinism", "guarded"]

_log = get_logger("actorflow.determinism")


class Determinism(enum.StrEnum):
    """What the determinism guard does with a call it catches (``RuntimeConfig.determinism``).

    .. versionadded:: 0.5
    """

    WARN = "warn"
    """Log a ``nondeterministic_call`` warning, once per call site."""
    STRICT = "strict"
    """Raise ``NondeterministicCallError`` at the call."""
    OFF = "off"
    """Leave every function as it is."""


_CLOCK = "await ctx.now()"
_RANDOM = "await ctx.random()"
_UUID = "await ctx.uuid()"
_SLEEP = "await ctx.sleep(seconds)"

GUARDED: dict[tuple[ModuleType, str], str] = {
    **{(time, n): _CLOCK for n in ("time", "time_ns", "monotonic", "monotonic_ns")},
    **{(time, n): _CLOCK for n in ("perf_counter", "perf_counter_ns")},
    (time, "sleep"): _SLEEP,
    **{
        (random, n): _RANDOM
        for n in (
            "random",
            "randint",
            "randrange",
            "choice",
            "choices",
            "shuffle",
            "sample",
            "uniform",
            "gauss",
            "normalvariate",
            "getrandbits",
            "randbytes",
            "triangular",
            "betavariate",
            "expovariate",
        )
    },
    (uuid, "uuid1"): _UUID,
    (uuid, "uuid4"): _UUID,
    (os, "urandom"): _RANDOM,
    **{
        (secrets, n): _RANDOM
        for n in ("token_bytes", "token_hex", "token_urlsafe", "randbelow", "randbits", "choice")
    },
    (anyio, "sleep"): _SLEEP,
}
"""Each function the guard watches (module, name), and the ``ctx`` call to use instead.

``asyncio.sleep`` too, once asyncio is imported (see :func:`_watched`): the
library never imports asyncio itself, and code that never did cannot call it.
"""


def _watched() -> dict[tuple[ModuleType, str], str]:
    """What to wrap now: :data:`GUARDED`, and ``asyncio.sleep`` if asyncio is loaded."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return GUARDED
    return {**GUARDED, (asyncio, "sleep"): _SLEEP}


class _Guard:
    __slots__ = ("mode", "run_id")

    def __init__(self, run_id: str, mode: Determinism) -> None:
        self.run_id = run_id
        self.mode = mode


_guard: ContextVar[_Guard | None] = ContextVar("actorflow_determinism", default=None)

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
# code that is not the user's: the standard library, installed packages, actorflow itself
_NOT_USERS = tuple(
    {
        os.path.join(path, "")
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_paths().get(key))
    }
    | {_PACKAGE}
)
_ACTOR_TASK = actor_task_code()

# callers found not to be the user's code, so each is looked at once
_library_code: set[CodeType] = set()
_warned: set[tuple[str, int]] = set()
_lock = threading.Lock()
_installed: dict[tuple[ModuleType, str], Callable[..., Any]] = {}
_users = 0


def _site(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _judge(guard: _Guard, call: str, instead: str, frame: FrameType) -> None:
    """Report the call made at ``frame`` if it is the orchestrator's own code."""
    filename = frame.f_code.co_filename
    if filename.startswith(_NOT_USERS) or filename.startswith("<"):
        _library_code.add(frame.f_code)
        return
    outer: FrameType | None = frame
    while outer is not None:
        if outer.f_code is _ACTOR_TASK:
            return  # inside an agent's handler: agents run live, never replayed
        outer = outer.f_back
    if guard.mode is Determinism.STRICT:
        raise NondeterministicCallError(guard.run_id, call, _site(frame), instead)
    key = (filename, frame.f_lineno)
    if key not in _warned:
        _warned.add(key)
        _log.warning(
            "nondeterministic_call",
            run_id=guard.run_id,
            call=call,
            site=_site(frame),
            instead=instead,
        )


def _wrap(module: ModuleType, name: str, original: Callable[..., Any], instead: str) -> Any:
    call = f"{module.__name__}.{name}"
    get = _guard.get
    caller = sys._getframe
    library = _library_code

    @functools.wraps(original)
    def watched(*args: Any, **kwargs: Any) -> Any:
        guard = get()
        if guard is not None:
            frame = caller(1)
            if frame.f_code not in library:
                _judge(guard, call, instead, frame)
        return original(*args, **kwargs)

    watched.__actorflow_original__ = original  # type: ignore[attr-defined]
    return watched


# each wrapper made once, for the function it was made for: runs come and go often
_wrappers: dict[tuple[ModuleType, str], tuple[Callable[..., Any], Any]] = {}


def _install() -> None:
    global _users
    with _lock:
        _users += 1
        if _users > 1:
            return
        for (module, name), instead in _watched().items():
            original = getattr(module, name, None)
            if original is None:
                continue
            made = _wrappers.get((module, name))
            if made is None or made[0] is not original:  # first use, or someone replaced it
                made = (original, _wrap(module, name, original, instead))
                _wrappers[module, name] = made
            _installed[module, name] = original
            setattr(module, name, made[1])


def _uninstall() -> None:
    global _users
    with _lock:
        _users -= 1
        if _users > 0:
            return
        for (module, name), original in _installed.items():
            setattr(module, name, original)
        _installed.clear()


@contextmanager
def guarded(run_id: str, mode: Determinism) -> Iterator[None]:
    """Watch the orchestrator code run inside (and in the tasks it starts) as ``mode`` says."""
    if mode is Determinism.OFF:
        yield
        return
    _install()
    token = _guard.set(_Guard(run_id, mode))
    try:
        yield
    finally:
        _guard.reset(token)
        _uninstall()
