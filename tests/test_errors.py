"""The error tree: one root, anyio-compatible mailbox errors, messages built from fields."""

from __future__ import annotations

import anyio
import pytest

from actorflow import errors


def test_every_public_error_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ActorflowError), name


def test_mailbox_errors_are_also_anyio_errors() -> None:
    assert issubclass(errors.MailboxFullError, anyio.WouldBlock)
    assert issubclass(errors.MailboxClosedError, anyio.ClosedResourceError)
    assert issubclass(errors.AskTimeoutError, TimeoutError)


def test_messages_name_the_actor_and_say_what_to_do() -> None:
    err = errors.MailboxFullError("counter", 16)
    assert "counter" in str(err)
    assert "await ref.send" in str(err)
    with pytest.raises(errors.ActorError) as info:
        raise errors.UnhandledMessageError("counter", int, (str,))
    assert info.value.actor == "counter"
    assert "@handler" in str(info.value)
