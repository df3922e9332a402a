"""Workflow and agent classes by stable name, filled as classes are defined.

Stored data names classes, with the module that defines each where it was
recorded. A class is found under ``__actorflow_name__`` if it sets one, else its
``__qualname__``, so ``python app.py``, ``python -m app`` and ``--app app:rt``
agree. A class defined again under the same module and name replaces the old
one; a name shared by classes of two different modules is an error only when
a run looks it up. A base class that sets ``__actorflow_abstract__ = True`` in
its own body (``Orchestrator``, ``Specialist``, ``Evaluator``) is never found:
a stored name must not resolve to a class no run can use.

A name this process has no class for is looked up once more after importing
the module recorded with it (:func:`module_of`), so ``actorflow recover``
finds a workflow of ``myproject.flows`` without ``--app``. Stored data makes
the process import nothing else: only a plain dotted module name recorded
with the name looked up, only when no class of this process has that name,
never ``__main__`` (a script's classes need ``--app``).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from actorflow.errors import RegistryError

__all__ = ["class_name", "is_abstract", "lookup", "module_of", "register"]

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

# name -> {module: class}
_classes: dict[str, dict[str, type[Any]]] = {}
# name -> abstract base class, kept only to say why such a name is refused
_abstract: dict[str, type[Any]] = {}


def is_abstract(cls: type[Any]) -> bool:
    """Whether ``cls`` is a base class to subclass (it sets ``__actorflow_abstract__``)."""
    return cls.__dict__.get("__actorflow_abstract__") is True


def class_name(cls: type[Any]) -> str:
    """The stable name ``cls`` is stored under."""
    name = cls.__dict__.get("__actorflow_name__")
    return name if isinstance(name, str) else cls.__qualname__


def module_of(cls: type[Any]) -> str | None:
    """The module stored with ``cls``'s name, to import it by; ``None`` for ``__main__``."""
    module = cls.__module__
    if not isinstance(module, str) or _main(module) or not _MODULE.fullmatch(module):
        return None
    return module


def _main(module: str) -> bool:
    return module == "__main__" or module.endswith(".__main__")


def register(cls: type[Any]) -> type[Any]:
    """Make ``cls`` findable by its stable name; returns it (usable as a decorator).

    An abstract base class is not made findable (see :func:`is_abstract`).
    """
    if is_abstract(cls):
        _abstract[class_name(cls)] = cls
        return cls
    modules = _classes.setdefault(class_name(cls), {})
    module = cls.__module__
    if _main(module):
        # `python app.py` and `python -m app` must find the same class: the
        # script's module name is an accident of how it was started.
        module = "__main__"
    modules[module] = cls
    return cls


def lookup(name: str, module: str | None = None) -> type[Any]:
    """The class stored under ``name`` (defined in ``module``, if the store recorded it).

    A name no class of this process has is looked up again after importing
    ``module``, if it is a plain dotted module name other than ``__main__``;
    a name several modules define is resolved by ``module``.

    Raises:
        RegistryError: no class has this name (import the module that defines
            it first; ``module`` could not be imported or does not define it),
            or two modules define different classes with it.
    """
    modules = _classes.get(name)
    if not modules and module is not None:
        modules = _import_for(name, module)
    if not modules and name in _abstract:
        base = _abstract[name]
        raise RegistryError(
            name,
            f"names the base class {base.__module__}.{base.__qualname__}, which no run "
            "can use; a workflow or agent is a subclass of it (defining `run` for a "
            "workflow)",
        )
    if not modules:
        raise RegistryError(
            name,
            "no class with this name is defined in this process; import the module "
            "that defines it (with `--app module:runtime` on the command line)",
        )
    if module is not None and module in modules:
        return modules[module]
    if len(modules) > 1:
        classes = set(modules.values())
        if len(classes) > 1:
            where = ", ".join(sorted(modules))
            raise RegistryError(
                name,
                f"defined in several modules ({where}); give one of them a distinct "
                "`__actorflow_name__`",
            )
    return next(iter(modules.values()))


def _import_for(name: str, module: str) -> dict[str, type[Any]] | None:
    """Import ``module``, recorded with ``name``, and return the classes ``name`` has now.

    Raises:
        RegistryError: ``module`` is no plain module name, or importing it failed.
    """
    if _main(module) or not _MODULE.fullmatch(module):
        raise RegistryError(
            name,
            f"its stored module {module!r} is not one actorflow imports; import the "
            "module that defines it (with `--app module:runtime` on the command line)",
        )
    try:
        importlib.import_module(module)
    except Exception as exc:
        raise RegistryError(
            name,
            f"its module {module!r} could not be imported ({type(exc).__name__}: {exc}); "
            "make it importable here (PYTHONPATH, an installed package) or import it "
            "with `--app module:runtime`",
        ) from exc
    return _classes.get(name)
