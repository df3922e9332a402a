"""For tools that read stored runs without running them: a run's query, and what its waits record.

Users ask a runtime (``Runtime.query``, ``Runtime.watch``) or call
:func:`actorflow.runtime.watch_run`. A tool that holds only a store (the
command line, an inspector) reads a run as the runtime would:
:func:`query_run` gives the same :class:`~actorflow.runtime.RunQuery` as
``Runtime.query``, from any process, owning nothing. Showing a run's log, it
finds a wait's request in the event of kind ``<kind>_requested`` for a
``kind`` in :data:`WAIT_KINDS`, and decodes it with :func:`read_request`.
Stored values (inputs, results, states, replies) become plain data with
:func:`decode_plain` and :func:`plain`, never importing the code that wrote
them, and :func:`field_changes` says how two of them differ.
"""

from __future__ import annotations

from actorflow.runtime.workflow._plain import decode_plain, field_changes, plain
from actorflow.runtime.workflow._query import query_run
from actorflow.runtime.workflow._wait_records import WAIT_KINDS, WaitRequest, read_request

__all__ = [
    "WAIT_KINDS",
    "WaitRequest",
    "decode_plain",
    "field_changes",
    "plain",
    "query_run",
    "read_request",
]

# a frozenset has no module to give
_OWN = ("WaitRequest", "decode_plain", "field_changes", "plain", "query_run", "read_request")
for _name in _OWN:
    globals()[_name].__module__ = __name__
del _name
