"""Message types found by the name a run stores them under, for tools that send messages.

``actorflow signal RUN TYPE`` and the inspector's forms name a message's type
as the run stores it: its ``__actorflow_name__``, else its qualified name
(``signal_type`` in the engine). The class is found among the classes the
process defines: the registry (workflows and agents), then every
``msgspec.Struct`` subclass, which ``--app`` imports with its module; plain
values go by their builtin name (``str``, ``int``...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from actorflow.errors import RegistryError
from actorflow.runtime.registry import class_name, lookup

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["find_message_type"]

_BUILTINS: Final[dict[str, type[Any]]] = {
    t.__name__: t for t in (str, int, float, bool, bytes, list, dict)
}


def find_message_type(name: str) -> type[Any]:
    """The class whose registered name is ``name``.

    Raises:
        RegistryError: no class the process defines has this name (the
            ``--app`` module does not import it), or several do.
    """
    try:
        return lookup(name)
    except RegistryError:
        pass  # not a workflow or agent: messages are Structs of the app's modules
    found = {cls for cls in _structs() if class_name(cls) == name}
    if len(found) > 1:
        where = ", ".join(sorted(f"{c.__module__}.{c.__qualname__}" for c in found))
        raise RegistryError(
            name,
            f"several classes have this name ({where}); give one a distinct __actorflow_name__",
        )
    if found:
        return found.pop()
    if name in _BUILTINS:
        return _BUILTINS[name]
    raise RegistryError(
        name,
        "no message type with this name is defined in this process; name it as the run "
        "does (its __actorflow_name__, else its qualified name) and import the module "
        "that defines it with --app module:attr",
    )


def _structs() -> Iterator[type[Any]]:
    seen: set[type[Any]] = set()
    stack: list[type[Any]] = [msgspec.Struct]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                yield sub
