"""Imports run one way, with no cycle, counting those under ``TYPE_CHECKING`` too.

The layers (docs: DESIGN "Layout"): ``agents`` → ``runtime`` → ``storage`` →
``errors``, ``_log`` and ``_text``; inside ``runtime``, the actor kernel (``runtime.actors``)
never imports the workflow engine (``runtime.workflow``) nor ``actorflow.runtime``
(which re-exports the engine). The graph is read from the source with ``ast``:
every import statement counts, at module level, in a function or under
``if TYPE_CHECKING:``, since a cycle a type checker follows is a design cycle too.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "actorflow"
ENGINE = "actorflow.runtime.workflow"
KERNEL = "actorflow.runtime.actors"

# lower layers first; a module may import its own layer and those below it
LAYERS = (
    ("actorflow.errors", "actorflow._log", "actorflow._text"),
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
