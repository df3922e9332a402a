"""The actor kernel: actors, mailboxes, refs, supervision, scopes and the actor system.

It knows nothing of workflows: the engine in :mod:`actorflow.runtime.workflow`
builds on the names this package exports.
"""
