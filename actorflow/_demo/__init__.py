"""The `actorflow demo` workflow: a code-review team over a source tree."""

from __future__ import annotations
