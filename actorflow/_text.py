"""Errors and values as text, safely: whatever users raise or pass, this never raises.

A user's exception can do anything in ``__str__`` (raise, return 20 MB, hold a
lone surrogate); turning it into text happens in actor tasks, log lines and
stored records, where a second error would take the runtime down with it.
"""

from __future__ import annotations

__all__ = ["MAX_ERROR_MESSAGE", "cap", "describe", "error_message", "safe_repr"]

MAX_ERROR_MESSAGE = 4096
"""Characters of an error message kept in stored records, errors and log lines."""


def cap(text: str, limit: int = MAX_ERROR_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was cut.

    Lone surrogates become ``\\udXXX`` escapes, so the text always encodes as UTF-8.
    """
    if len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} more characters cut]"
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode()
    return text


def error_message(error: BaseException, limit: int = MAX_ERROR_MESSAGE) -> str:
    """``str(error)``, capped; ``<unprintable T>`` when its ``__str__`` fails."""
    try:
        text = str(error)
    except Exception:
        return f"<unprintable {type(error).__name__}>"
    return cap(text, limit)


def describe(error: BaseException) -> str:
    """``"TypeName: message"`` for errors and log lines, safely and capped."""
    return f"{type(error).__name__}: {error_message(error)}"


def safe_repr(value: object, limit: int = 200) -> str:
    """``repr(value)``, capped; ``<unprintable T>`` when its ``__repr__`` fails."""
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"
    return cap(text, limit)
