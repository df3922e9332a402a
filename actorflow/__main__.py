"""``python -m actorflow``: the same command line as the ``actorflow`` script."""

from __future__ import annotations

from actorflow.cli import main

main()
