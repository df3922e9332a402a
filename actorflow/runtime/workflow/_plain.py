"""Stored user values as plain data, without their classes, and how two of them differ.

Inputs, results, agent states and replies are stored as MessagePack bytes;
they are decoded here without a type (``msgspec.msgpack.decode``), so reading
them never imports or runs the code that wrote them. ``actorflow diff``,
``actorflow compare`` (:func:`compare_runs`) and the other readers share this.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

__all__ = ["brief", "decode_plain", "field_changes", "plain"]


def plain(value: Any) -> Any:
    """``value`` with every part JSON can hold: bytes become text or ``base64:...``."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode("ascii")
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, msgspec.msgpack.Ext):
        return {"ext": value.code, "data": plain(value.data)}
    if isinstance(value, msgspec.Struct):
        return plain(msgspec.to_builtins(value))
    return value


def decode_plain(data: bytes | None) -> Any:
    """Decode a stored user value (MessagePack) without its type; undecodable bytes stay bytes."""
    if data is None:
        return None
    try:
        return plain(msgspec.msgpack.decode(data))
    except msgspec.DecodeError:
        return plain(data)


def field_changes(old: Any, new: Any) -> dict[str, list[Any]]:
    """Changed top-level fields of two plain values: ``{field: [old, new]}``.

    Values that are not both mappings differ as a whole, under ``<value>``;
    long lists and mappings are shown by their size (:func:`brief`).
    """
    if old == new:
        return {}
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return {"<value>": [brief(old), brief(new)]}
    return {
        k: [brief(old.get(k)), brief(new.get(k))]
        for k in sorted(set(old) | set(new))
        if old.get(k) != new.get(k)
    }


def brief(value: Any) -> Any:
    """``value``, or ``<list of N>``/``<dict of N>`` for a long one, which would drown a diff."""
    if isinstance(value, list | dict) and len(value) > 8:
        return f"<{type(value).__name__} of {len(value)}>"
    return value
