"""For implementers of tools and cluster engines: workflow and agent classes by stable name.

Stored data names classes by a stable name (``__actorflow_name__``, else the
``__qualname__``) and the module that defines each. Users only call
:func:`register`, for a workflow class that is not an ``Actor`` subclass (also
importable from :mod:`actorflow.runtime`); every ``Actor`` subclass registers
itself when it is defined. A process that decodes stored names or ships
classes to another process resolves them here: :func:`class_name` and
:func:`module_of` give what is stored for a class, and :func:`lookup` the
class a stored name stands for.
"""

from __future__ import annotations

from actorflow.runtime.actors import class_name, lookup, module_of, register

__all__ = ["class_name", "lookup", "module_of", "register"]

for _name in __all__:
    if _name != "register":  # users call it: actorflow.runtime names it
        globals()[_name].__module__ = __name__
del _name
