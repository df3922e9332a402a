"""The durable workflow engine: runs, steps, replay, the decision log and snapshots.

Built on the actor kernel (:mod:`actorflow.runtime.actors`); the public names
are re-exported by :mod:`actorflow.runtime`.
"""
