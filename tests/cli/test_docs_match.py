"""docs/cli.md describes the CLI exactly: its commands, their arguments and options, exit codes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from actorflow.cli import EXIT_CODES, app

DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()

# Options the docs give once, in "Options every command takes", not in each heading.
EVERY = {"--store", "--debug", "--json"}
# Given once too, in "Encrypted stores": every command under these sections takes it.
STORE_SECTIONS = ("## Looking inside", "## Housekeeping")
KEY_FILE = "--key-file"
# Commands that take no --json for their output: result and update print JSON already;
# worker, signal, cancel, schedule and ui print no data (signal and update take --json DATA,
# their message).
ALWAYS_JSON = {"result", "worker", "signal", "update", "cancel", "schedule", "ui"}


def documented() -> dict[str, tuple[list[str], set[str]]]:
    """Each ``### `actorflow CMD ...` `` heading: its arguments (``[B]`` optional) and options."""
    found: dict[str, tuple[list[str], set[str]]] = {}
    store_part = DOC[min(DOC.index(s) for s in STORE_SECTIONS) :]
    reading = set(re.findall(r"^### `actorflow (\w+)", store_part, flags=re.MULTILINE))
    for name, rest in re.findall(r"^### `actorflow (\w+)(.*)`$", DOC, flags=re.MULTILINE):
        arguments: list[str] = []
        options: set[str] = set()
        after_option = False
        for token in rest.replace("|", " ").split():
            bare = token.strip("[]()")  # `(--json DATA | --file F)`: one of them
            if bare.startswith("--"):
                options.add(bare)
                after_option = not token.endswith("]")  # `[--keep N]`: N is its value
                continue
            if after_option or bare in ("...",):
                after_option = False
                continue
            arguments.append(token if token.startswith("[") else bare)
        options |= EVERY - ({"--json"} if name in ALWAYS_JSON else set())
        found[name] = (arguments, options | ({KEY_FILE} if name in reading else set()))
    return found


def actual() -> dict[str, tuple[list[str], set[str]]]:
    """The same, read from the typer app's click command tree."""
    group: Any = typer.main.get_command(app)
    found: dict[str, tuple[list[str], set[str]]] = {}
    for name, command in group.commands.items():
        arguments: list[str] = []
        options: set[str] = set()
        for param in command.params:
            if param.param_type_name == "argument":
                arguments.append(param.metavar if param.required else f"[{param.metavar}]")
            elif not param.hidden:
                options.update(o for o in [*param.opts, *param.secondary_opts] if o[:2] == "--")
        found[name] = (arguments, options)
    return found


def test_every_command_is_documented_with_its_arguments_and_options() -> None:
    assert documented() == actual()


def test_the_documented_exit_codes_are_the_cli_s() -> None:
    table = DOC[DOC.index("## Exit codes") :].split("\n\n")[1]
    codes = {int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.MULTILINE)}
    assert codes == set(EXIT_CODES.values())
