"""Regenerate docs/api.md from the public names' docstrings: ``python docs/_gen_api.py``.

Public means listed in a public module's ``__all__``; tests/test_docs.py checks
that the page names every one of them.
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

MODULES = (
    "actorflow",
    "actorflow.runtime",
    "actorflow.runtime.cluster",
    "actorflow.runtime.registry",
    "actorflow.runtime.reading",
    "actorflow.runtime.replaying",
    "actorflow.agents",
    "actorflow.storage",
    "actorflow.testing",
    "actorflow.testing.conformance",
    "actorflow.errors",
    "actorflow.ray",
    "actorflow.cli.progress",
    "actorflow.ui",
)
INTRO = """\
# API reference

Generated from the docstrings by `python docs/_gen_api.py`; every name in a
public module's `__all__` is here. A name listed by more than one module
(`actorflow` itself re-exports many) is described once, under the first.
See [concepts](concepts.md) for how the pieces fit.
"""


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def _signature(obj: Any) -> str:
    try:
        # default values that are functions print with their address: drop it
        return re.sub(r" at 0x[0-9a-f]+>", ">", str(inspect.signature(obj)))
    except Exception:  # an annotation that does not resolve: show no signature
        return "(...)"


def _mixin(base: type) -> bool:
    """A base from a private module that no public module exports: a piece of its class."""
    private = any(part.startswith("_") for part in base.__module__.split("."))
    return base is not object and private and _home(base.__name__, base) is None


def _members(cls: type) -> list[str]:
    lines = []
    seen: set[str] = set()
    own = [(n, m) for c in (cls, *filter(_mixin, cls.__bases__)) for n, m in vars(c).items()]
    for name, member in own:
        if name.startswith("_") or name in seen or not (member.__doc__ or "").strip():
            continue
        seen.add(name)
        if isinstance(member, property | functools.cached_property):
            lines.append(f"- `{name}` (property): {_doc(member).splitlines()[0]}")
        elif inspect.isfunction(member) or isinstance(member, classmethod | staticmethod):
            fn = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            prefix = "async " if inspect.iscoroutinefunction(fn) else ""
            lines.append(f"- `{prefix}{name}{_signature(fn)}`: {_doc(fn).splitlines()[0]}")
    return lines


def _entry(module: str, name: str, obj: Any) -> list[str]:
    out = []
    if inspect.isclass(obj):
        bases = ", ".join(b.__name__ for b in obj.__bases__ if b is not object and not _mixin(b))
        kind = "enum" if issubclass(obj, enum.Enum) else "class"
        out.append(f"### `{name}` ({kind}{': ' + bases if bases else ''})\n")
        out.append(f"`{module}.{name}{_signature(obj) if kind == 'class' else ''}`\n")
        out.append(_doc(obj) + "\n")
        if issubclass(obj, enum.Enum):
            out.append("Values: " + ", ".join(f"`{m.value}`" for m in obj) + "\n")
        else:
            members = _members(obj)
            if members:
                out.append("\n".join(members) + "\n")
    elif callable(obj):
        prefix = "async " if inspect.iscoroutinefunction(obj) else ""
        out.append(f"### `{name}` (function)\n")
        out.append(f"`{prefix}{module}.{name}{_signature(obj)}`\n")
        out.append(_doc(obj) + "\n")
    else:
        out.append(f"### `{name}`\n")
        # a value's repr may hold its memory address: name its type instead
        shown = (
            repr(obj)
            if isinstance(obj, int | float | str | tuple)
            # a set's repr follows string hashing, which changes from run to run
            else f"frozenset({{{', '.join(sorted(map(repr, obj)))}}})"
            if isinstance(obj, frozenset)
            else (f"a {type(obj).__module__}.{type(obj).__qualname__}")
        )
        out.append(f"`{module}.{name}` = `{shown}`\n")
    return out


def _home(name: str, obj: Any) -> str | None:
    """The first public module other than ``actorflow`` that lists ``obj`` as ``name``."""
    for module_name in MODULES[1:]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if name in getattr(module, "__all__", ()) and getattr(module, name) is obj:
            return module_name
    return None


def render() -> str:
    parts = [INTRO]
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        parts.append(f"\n## `{module_name}`\n\n{_doc(module).splitlines()[0]}\n")
        shortcuts = []
        for name in sorted(getattr(module, "__all__", [])):
            obj = getattr(module, name)
            home = _home(name, obj)  # an earlier public module that lists it describes it
            home = None if home == module_name else home
            if inspect.ismodule(obj):
                shortcuts.append(f"- `{name}`: the module `{obj.__name__}`")
            elif home is not None:
                shortcuts.append(f"- `{name}`: see `{home}.{name}`")
            else:
                parts.extend(_entry(module_name, name, obj))
        if shortcuts:
            parts.append("Also importable from here:\n\n" + "\n".join(shortcuts) + "\n")
    return "\n".join(parts).replace("\n\n\n", "\n\n")


if __name__ == "__main__":
    target = Path(__file__).with_name("api.md")
    target.write_text(render())
    print(f"wrote {target}")
