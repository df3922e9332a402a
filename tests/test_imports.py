"""Imports run one way, with no cycle, counting those under ``TYPE_CHECKING`` too.

The layers (docs: DESIGN "Layout"): ``agents`` → ``runtime`` → ``storage`` →
``errors``, ``_log`` and ``_text``; inside ``runtime``, the actor kernel (``runtime.actors``)
never imports the workflow engine (``runtime.workflow``) nor ``actorflow.runtime``
(which re-exports the engine). The graph is read from the source with ``ast``:
every import statement counts, at module level, in a function or under
``if TYPE_CHECKING:``, since a cycle a type checker follows is a design cycle too.

Across top-level packages, only public names (docs/internals.md, "Public and
private"): a module of one package (``actorflow.cli``, ``actorflow.storage``...)
imports no private module (a ``_`` segment below the package's own name) and
no private name of another; inside one package, anything goes. The package's
own name does not count: ``actorflow._demo``'s ``__init__`` is its public face
(the underscore says users have no business there). The root's own modules
(``actorflow._log``, ``actorflow._text``, ``actorflow._files``) are utilities every
package shares.
``importlib.import_module("actorflow...")`` with a literal name counts too. Only
``actorflow/`` is read: tests and benchmarks may use internals.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "actorflow"
ENGINE = "actorflow.runtime.workflow"
KERNEL = "actorflow.runtime.actors"

# lower layers first; a module may import its own layer and those below it
LAYERS = (
    ("actorflow.errors", "actorflow._log", "actorflow._text", "actorflow._files"),
    ("actorflow.storage",),
    ("actorflow.runtime",),
    ("actorflow.agents",),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _graph() -> dict[str, set[str]]:
    """Module → the actorflow modules it imports (a ``from pkg import sub`` names ``pkg.sub``)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in paths else base)
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _in(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _layer(module: str) -> int | None:
    for level, prefixes in enumerate(LAYERS):
        if any(_in(module, prefix) for prefix in prefixes):
            return level
    return None  # the top: actorflow itself, cli, testing, the demo


def test_the_graph_sees_the_package() -> None:
    graph = _graph()
    assert KERNEL in graph["actorflow.runtime"]
    assert "actorflow.runtime.actors._cell" in graph["actorflow.runtime.actors._scope"]
    assert "actorflow.runtime.actors._envelope" in graph["actorflow.runtime.actors._cell"]


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_imports_run_down_the_layers() -> None:
    wrong = []
    for module, targets in sorted(_graph().items()):
        level = _layer(module)
        for target in sorted(targets):
            target_level = _layer(target)
            if level is not None and (target_level is None or target_level > level):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_actor_kernel_never_imports_the_workflow_engine() -> None:
    wrong = [
        f"{module} -> {target}"
        for module, targets in sorted(_graph().items())
        if _in(module, KERNEL)
        for target in sorted(targets)
        if _in(target, ENGINE) or target == "actorflow.runtime"
    ]
    assert not wrong, "the kernel imports the engine:\n" + "\n".join(wrong)


def test_the_command_line_reaches_the_demo_only_through_the_demo_command() -> None:
    demo, entry = "actorflow._demo", "actorflow.cli._commands_demo"
    wrong = [
        f"{module} -> {target}"
        for module, targets in sorted(_graph().items())
        if _in(module, "actorflow.cli") and module != entry
        for target in sorted(targets)
        if _in(target, demo)
    ]
    assert not wrong, "CLI modules import the demo:\n" + "\n".join(wrong)
    assert demo in _graph()[entry]


class Imported(NamedTuple):
    """One imported module and, for ``from module import name``, the name."""

    line: int
    module: str
    name: str | None


def _imports(source: str, module: str, *, is_package: bool) -> list[Imported]:
    """Every actorflow import in ``source`` (``module``'s), made absolute; ``import_module`` too."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[Imported] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(Imported(node.lineno, alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.extend(Imported(node.lineno, base, alias.name) for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Imported(node.lineno, node.args[0].value, None))
    return [i for i in found if _in(i.module, "actorflow")]


def _top_package(module: str) -> str:
    """The top-level package of ``module``: ``actorflow`` itself for the root's own modules."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "actorflow"


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _reaches_in(importer: str, imported: Imported) -> str | None:
    """The private part of another package that ``imported`` names, or None."""
    target = imported.module if imported.name is None else f"{imported.module}.{imported.name}"
    home, there = _top_package(importer), _top_package(target)
    if there == home:
        return None
    below = target.split(".")[len(there.split(".")) :]
    if there == "actorflow" and below and (PACKAGE / f"{below[0]}.py").exists():
        below = below[1:]  # the root's own modules (``actorflow._log``) are every package's
    return next((part for part in below if _private(part)), None)


def _private_imports() -> list[str]:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for imported in _imports(path.read_text(), module, is_package=path.name == "__init__.py"):
            part = _reaches_in(module, imported)
            if part is not None:
                shown = imported.module + (f" import {imported.name}" if imported.name else "")
                where = path.relative_to(PACKAGE.parent)
                owner = _top_package(imported.module)
                wrong.append(f"{where}:{imported.line}: {shown} (`{part}` is {owner}'s own)")
    return wrong


@pytest.mark.parametrize(
    ("importer", "source", "reaches"),
    [
        ("actorflow.cli._live", "from actorflow.storage._records import Snapshot", "_records"),
        ("actorflow.cli._live", "from actorflow.storage import _records", "_records"),
        ("actorflow.cli._live", "import actorflow.storage.file._threads", "_threads"),
        ("actorflow.cli._live", "from actorflow.runtime.workflow import _run", "_run"),
        ("actorflow.ray._host", "from actorflow.storage import _private_name", "_private_name"),
        ("actorflow.ray._host", "importlib.import_module('actorflow.runtime._x')", "_x"),
        (
            "actorflow.ray._host",
            "if T:\n    def f():\n        from actorflow.cli._a import b",
            "_a",
        ),
        ("actorflow.storage.file._log", "from actorflow.storage._sealing import Codec", None),
        ("actorflow.storage.file._log", "from .._sealing import Codec", None),
        ("actorflow.cli._live", "from actorflow.storage import Snapshot", None),
        ("actorflow.cli._live", "from actorflow.runtime.cluster import Cluster", None),
        ("actorflow.cli._live", "from actorflow._log import get_logger", None),
        ("actorflow.cli._live", "from actorflow import _text", None),
        ("actorflow.cli._live", "from actorflow.storage import __version__", None),
        ("actorflow.cli._commands_demo", "from actorflow._demo import ReviewTeam", None),
        ("actorflow._demo._workflow", "from actorflow.cli._progress import progress", "_progress"),
        ("actorflow.__main__", "from actorflow.cli._app import main", "_app"),
    ],
)
def test_the_check_sees_a_private_import(importer: str, source: str, reaches: str | None) -> None:
    [imported] = _imports(source, importer, is_package=False)
    assert _reaches_in(importer, imported) == reaches


def test_no_package_imports_another_packages_private_names() -> None:
    wrong = _private_imports()
    assert not wrong, (
        "private names imported from another package (docs/internals.md, 'Public and "
        "private'):\n"
        + "\n".join(wrong)
        + "\nImport what users call from the package itself (add it to its __init__'s "
        "__all__), what implementers and other layers need from a public module for them "
        "(like actorflow.runtime.cluster), or move the code into the package that uses it."
    )
