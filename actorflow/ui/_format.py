"""How values look on a page: times, sizes, durations, decoded values as bounded JSON.

Every function returns plain text; the templates escape it (autoescape is on),
so nothing a run stored can become markup. A value too long to read (a string
of a megabyte, a list of thousands) is cut with a note saying how much was left
out, so one stored value never makes a page unusable.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Final

__all__ = ["MAX_TEXT", "brief", "duration", "line", "pretty", "size", "when", "when_full"]

MAX_TEXT: Final = 4000
"""Characters of one string shown; the rest is counted, not shown."""

_MAX_ITEMS: Final = 200
_MAX_PRETTY: Final = 200_000


def when(ts: float | None) -> str:
    """A time as the page shows it: ``HH:MM:SS`` today, else with its date (UTC)."""
    if not ts:
        return "-"
    moment = dt.datetime.fromtimestamp(ts, dt.UTC)
    if moment.date() == dt.datetime.now(dt.UTC).date():
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%Y-%m-%d %H:%M")


def when_full(ts: float | None) -> str:
    """A time with date and milliseconds (UTC), for a tooltip or a record."""
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def duration(seconds: float | None) -> str:
    """``1.234 s``, ``12 ms``, ``3 min 2 s``; ``-`` for none."""
    if seconds is None or seconds < 0:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 120:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


def size(n: int | None) -> str:
    """A byte count as ``12 B``, ``3.4 KB``, ``1.2 MB``."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def brief(value: Any, limit: int = MAX_TEXT) -> Any:
    """``value`` with long strings cut and long containers shortened, each cut said."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}… ({len(value) - limit} more characters)"
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(brief(k, 200)): brief(v, limit) for k, v in items[:_MAX_ITEMS]}
        if len(items) > _MAX_ITEMS:
            out["…"] = f"{len(items) - _MAX_ITEMS} more entries"
        return out
    if isinstance(value, list | tuple):
        shown = [brief(v, limit) for v in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            shown.append(f"… {len(value) - _MAX_ITEMS} more items")
        return shown
    return value


def pretty(value: Any) -> str:
    """``value`` as indented JSON for a ``<pre>``, bounded (see :func:`brief`)."""
    text = json.dumps(brief(value), indent=2, ensure_ascii=False, default=str)
    if len(text) > _MAX_PRETTY:
        return f"{text[:_MAX_PRETTY]}\n… ({len(text) - _MAX_PRETTY} more characters)"
    return text


def line(value: Any, limit: int = 160) -> str:
    """``value`` on one line, cut at ``limit`` characters (a table cell)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"
