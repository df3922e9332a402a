"""The root of the error tree, and errors about options, names, classes and the Runtime itself."""

from __future__ import annotations

from actorflow._text import safe_repr

__all__ = [
    "ActorDefinitionError",
    "ActorflowError",
    "ConfigurationError",
    "InvalidNameError",
    "InvalidRunIdError",
    "RegistryError",
    "RuntimeNotRunningError",
]


class ActorflowError(Exception):
    """Base class of every error actorflow raises."""


class ConfigurationError(ActorflowError, ValueError):
    """An option has a value actorflow cannot use."""

    def __init__(self, option: str, value: object, expected: str) -> None:
        self.option = option
        self.value = value
        self.expected = expected
        super().__init__(f"invalid value {safe_repr(value)} for {option}: expected {expected}")


class InvalidNameError(ActorflowError, ValueError):
    """A name that cannot be used, because names become parts of storage keys."""

    kind = "actor name"

    def __init__(self, name: object, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(
            f"invalid {self.kind} {name!r}: {reason}; use 1-128 characters from "
            "letters, digits, '-', '_' and '.', not starting with '.'"
        )


class InvalidRunIdError(InvalidNameError):
    """A run id that is unsafe as a file name or an S3 key."""

    kind = "run id"


class ActorDefinitionError(ActorflowError, TypeError):
    """An actor class is declared wrongly; found when it is first spawned."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class RuntimeNotRunningError(ActorflowError, RuntimeError):
    """The Runtime was used outside its ``async with`` block."""

    def __init__(self, action: str) -> None:
        self.action = action
        super().__init__(
            f"cannot {action}: the Runtime is not running; use it inside "
            "`async with Runtime() as runtime:`"
        )


class RegistryError(ActorflowError, LookupError):
    """A workflow or agent class named in stored data is unknown or ambiguous."""

    def __init__(self, name: str, detail: str) -> None:
        self.name = name
        self.detail = detail
        super().__init__(f"class {name!r}: {detail}")
