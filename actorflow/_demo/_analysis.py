"""The demo's code review, as pure functions over a source tree: no actors, no I/O but reads.

One ``ast`` pass per file gathers everything a review needs (size, functions,
classes, a cyclomatic-style complexity, missing docstrings, risky calls), because
parsing dominates the cost: over the standard library (~1,800 files) a parse
costs about ten times the walk. ``strict=True`` is the stricter reviewer the
evaluator asks for when it is unsure about an area: it also counts private
definitions, more call patterns and more branch kinds.
"""

from __future__ import annotations

import ast
import json
import os
import site
import sysconfig
import threading
from importlib import resources
from pathlib import Path
from typing import Final

import msgspec

__all__ = [
    "AreaScore",
    "FileReport",
    "RiskyCall",
    "analyse_file",
    "analyse_files",
    "area_of",
    "default_root",
    "discover",
    "group_by_area",
    "score_area",
]

# Folders never reviewed: installed third-party code, caches, metadata, VCS.
_EXCLUDED_DIRS: Final = frozenset(
    {"site-packages", "dist-packages", "__pycache__", "node_modules", ".git", ".hg", ".tox"}
)
_EXCLUDED_SUFFIXES: Final = (".dist-info", ".egg-info")

# CPython 3.11 keeps the AST constructor's recursion depth in state shared by all
# threads; if a garbage collection inside one parse runs Python code (finalizers,
# plentiful while Ctrl-C unwinds the runtime) and another thread parses meanwhile,
# one of them fails with "SystemError: AST constructor recursion depth mismatch"
# (python/cpython#106905, fixed in 3.12). Parsing holds the GIL throughout, so
# taking turns costs no parallelism.
_PARSE_LOCK: Final = threading.Lock()

# Calls the review flags in the code it reads, by qualified name, with why: data,
# kept beside this module (nothing here imports or calls them).
_RISKY_TABLE: Final = json.loads(
    resources.files("actorflow._demo").joinpath("risky_calls.json").read_text("utf-8")
)
_RISKY: Final[dict[str, str]] = _RISKY_TABLE["default"]
_STRICT_RISKY: Final[dict[str, str]] = {**_RISKY, **_RISKY_TABLE["strict_extra"]}
_SUBPROCESS: Final = frozenset(
    {"run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput"}
)
_BRANCHES: Final = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.IfExp)
_STRICT_BRANCHES: Final = (*_BRANCHES, ast.With, ast.AsyncWith, ast.Assert, ast.match_case)
_FUNCS: Final = (ast.FunctionDef, ast.AsyncFunctionDef)
_SPECIAL: Final = frozenset({*_FUNCS, ast.ClassDef, ast.Call, ast.Import, ast.ImportFrom})


class RiskyCall(msgspec.Struct, frozen=True):
    """One call a reviewer should look at: where, what, why."""

    line: int
    call: str
    reason: str


class FileReport(msgspec.Struct, frozen=True, kw_only=True):
    """What the review found in one file; ``error`` is set when it does not parse."""

    path: str
    area: str
    lines: int = 0
    functions: int = 0
    classes: int = 0
    complexity: int = 0
    max_complexity: int = 0
    most_complex: str = ""
    documentable: int = 0
    missing_docstrings: int = 0
    risky: tuple[RiskyCall, ...] = ()
    error: str | None = None
    strict: bool = False


class AreaScore(msgspec.Struct, frozen=True, kw_only=True):
    """The evaluator's verdict on one area (a package or folder)."""

    area: str
    files: int
    confidence: float
    rationale: str
    strict: bool = False
    risky_calls: int = 0
    missing_docstrings: int = 0
    max_complexity: int = 0


def default_root() -> Path:
    """The standard library's own folder, which ships with every Python."""
    return Path(sysconfig.get_paths()["stdlib"])


def _installed_dirs() -> set[Path]:
    # Where packages get installed, wherever the tree is: never part of the review.
    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    paths.update(site.getsitepackages())
    paths.add(site.getusersitepackages())
    return {Path(p).resolve() for p in paths if p}


def discover(root: Path | str | None = None) -> list[str]:
    """Every ``.py`` file under ``root`` (default: the standard library), sorted, relative.

    Installed packages (``site-packages``, ``dist-packages``, the interpreter's
    install folders, ``*.dist-info``), caches, hidden folders and virtual
    environments are skipped.
    """
    base = Path(root) if root is not None else default_root()
    if not base.is_dir():
        raise NotADirectoryError(f"{base} is not a folder")
    installed = _installed_dirs()
    found: list[str] = []
    for folder, dirs, files in os.walk(base):
        here = Path(folder)
        dirs[:] = [
            d
            for d in dirs
            if d not in _EXCLUDED_DIRS
            and not d.startswith(".")
            and not d.endswith(_EXCLUDED_SUFFIXES)
            and (here / d).resolve() not in installed
            and not (here / d / "pyvenv.cfg").exists()
        ]
        rel = here.relative_to(base)
        found.extend((rel / f).as_posix() for f in files if f.endswith(".py"))
    found.sort()
    return found


def area_of(path: str) -> str:
    """The area a file belongs to: its folder, at most two levels deep (``<top>`` at the root)."""
    parts = path.split("/")[:-1]
    return "/".join(parts[:2]) if parts else "<top>"


def group_by_area(paths: list[str]) -> dict[str, list[str]]:
    """Files grouped by :func:`area_of`, areas in sorted order."""
    areas: dict[str, list[str]] = {}
    for p in paths:
        areas.setdefault(area_of(p), []).append(p)
    return dict(sorted(areas.items()))


def analyse_files(root: Path | str, paths: list[str], *, strict: bool = False) -> list[FileReport]:
    """:func:`analyse_file` for each of ``paths`` (relative to ``root``), in order."""
    base = Path(root)
    return [analyse_file(base, p, strict=strict) for p in paths]


def analyse_file(root: Path | str, path: str, *, strict: bool = False) -> FileReport:
    """Review one file; a file that cannot be read or parsed gets a report with ``error``.

    Args:
        root: the tree's folder.
        path: the file, relative to ``root`` with ``/`` separators.
        strict: the stricter reviewer (private definitions need docstrings too,
            more risky calls, more branch kinds count towards complexity).
    """
    area = area_of(path)
    try:
        source = (Path(root) / path).read_bytes()
        with _PARSE_LOCK:
            tree = ast.parse(source, filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # Test data in the standard library is deliberately broken; report, not crash.
        return FileReport(path=path, area=area, error=f"{type(exc).__name__}: {exc}", strict=strict)
    lines = source.count(b"\n") + (0 if source.endswith(b"\n") or not source else 1)
    return _Review(strict).run(tree, path, area, lines)


class _Review:
    """One pass over a module's tree; the state of that pass."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.branches = _STRICT_BRANCHES if strict else _BRANCHES
        self.risky_names = _STRICT_RISKY if strict else _RISKY
        self.aliases: dict[str, str] = {}
        self.functions = 0
        self.classes = 0
        self.documentable = 0
        self.missing = 0
        self.risky: list[RiskyCall] = []
        # complexity per function name, in definition order
        self.complexity: dict[str, int] = {}

    def run(self, tree: ast.Module, path: str, area: str, lines: int) -> FileReport:
        self._docstring(tree, "<module>")
        calls = self._walk(tree)
        # Imports anywhere in the module name what a call means, so resolve calls last.
        for call in calls:
            self._call(call)
        total = sum(self.complexity.values())
        worst = max(self.complexity.items(), key=lambda kv: kv[1], default=("", 0))
        return FileReport(
            path=path,
            area=area,
            lines=lines,
            functions=self.functions,
            classes=self.classes,
            complexity=total,
            max_complexity=worst[1],
            most_complex=worst[0],
            documentable=self.documentable,
            missing_docstrings=self.missing,
            risky=tuple(sorted(self.risky, key=lambda r: (r.line, r.call))),
            strict=self.strict,
        )

    def _walk(self, tree: ast.Module) -> list[ast.Call]:
        """Visit every node once, tracking the enclosing function; return the calls.

        The hot loop of the demo (millions of nodes over the standard library):
        children are pushed inline rather than through ``ast.iter_child_nodes``,
        and the common node types cost one set lookup each.
        """
        branches = frozenset(self.branches)
        complexity = self.complexity
        calls: list[ast.Call] = []
        stack: list[tuple[ast.AST, str]] = [(tree, "<module>")]
        push, pop, node_type = stack.append, stack.pop, ast.AST
        while stack:
            node, owner = pop()
            kind = type(node)
            if kind in _SPECIAL:
                owner = self._special(node, owner, calls)
            elif owner in complexity:
                if kind in branches:
                    complexity[owner] += 1
                elif kind is ast.BoolOp:
                    complexity[owner] += len(node.values) - 1  # type: ignore[attr-defined]
                elif kind is ast.comprehension:
                    complexity[owner] += len(node.ifs) + (1 if self.strict else 0)  # type: ignore[attr-defined]
            for field in node._fields:
                value = getattr(node, field, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, node_type):
                            push((item, owner))
                elif isinstance(value, node_type) and field != "ctx":
                    push((value, owner))
        return calls

    def _special(self, node: ast.AST, owner: str, calls: list[ast.Call]) -> str:
        """Functions, classes, calls and imports; return the owner of ``node``'s children."""
        if isinstance(node, ast.Call):
            calls.append(node)
        elif isinstance(node, _FUNCS):
            self.functions += 1
            name = node.name if owner == "<module>" else f"{owner}.{node.name}"
            self.complexity[name] = 1
            self._docstring(node, node.name)
            return name
        elif isinstance(node, ast.ClassDef):
            self.classes += 1
            self._docstring(node, node.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                self.aliases[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        return owner

    def _docstring(self, node: ast.AST, name: str) -> None:
        if not self.strict and name.startswith("_") and name != "<module>":
            return
        self.documentable += 1
        body = getattr(node, "body", [])
        first = body[0] if body else None
        documented = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        )
        if not documented:
            self.missing += 1

    def _qualname(self, func: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        parts.append(self.aliases.get(func.id, func.id))
        return ".".join(reversed(parts))

    def _call(self, node: ast.Call) -> None:
        name = self._qualname(node.func)
        if name is None:
            return
        reason = self.risky_names.get(name)
        if reason is None:
            reason = self._risky_by_arguments(name, node)
        if reason is not None:
            self.risky.append(RiskyCall(node.lineno, name, reason))

    def _risky_by_arguments(self, name: str, node: ast.Call) -> str | None:
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        module, _, func = name.rpartition(".")
        if module == "subprocess" and func in _SUBPROCESS:
            shell = keywords.get("shell")
            if func in ("getoutput", "getstatusoutput"):
                return "runs its argument through the shell"
            if isinstance(shell, ast.Constant) and shell.value is True:
                return "runs a command through the shell (shell=True)"
            if self.strict and shell is not None and not isinstance(shell, ast.Constant):
                return "shell= is decided at run time"
        if name == "yaml.load":
            loader = keywords.get("Loader")
            if loader is None and len(node.args) < 2:
                return "yaml.load without a Loader constructs arbitrary objects"
            if self.strict and loader is not None and "Safe" not in ast.unparse(loader):
                return "yaml.load with a loader that is not a SafeLoader"
        return None


# Weights of what lowers the evaluator's confidence that an area needs no second look.
_RISK_WEIGHT: Final = 0.6
_ERROR_WEIGHT: Final = 0.5
_DOC_WEIGHT: Final = 0.25
_COMPLEXITY_WEIGHT: Final = 0.25
_COMPLEX_FUNCTION: Final = 15


def score_area(area: str, reports: list[FileReport]) -> AreaScore:
    """Score an area's reviews: a confidence in 0..1 that it needs no second look, and why.

    Confidence starts at 1 and drops with risky calls per thousand lines,
    files that did not parse, missing docstrings and very complex functions;
    the rationale names the factors that cost the most.
    """
    lines = sum(r.lines for r in reports) or 1
    risky = sum(len(r.risky) for r in reports)
    errors = sum(1 for r in reports if r.error is not None)
    documentable = sum(r.documentable for r in reports)
    missing = sum(r.missing_docstrings for r in reports)
    complex_files = sum(1 for r in reports if r.max_complexity >= _COMPLEX_FUNCTION)
    parsed = max(len(reports) - errors, 1)
    penalties = {
        f"{risky} risky call(s)": _RISK_WEIGHT * min(1.0, risky * 1000 / lines / 2),
        f"{errors} file(s) did not parse": _ERROR_WEIGHT * errors / max(len(reports), 1),
        f"{missing}/{documentable} definitions lack docstrings": _DOC_WEIGHT
        * (missing / documentable if documentable else 0.0),
        f"{complex_files} file(s) with a function of complexity >= {_COMPLEX_FUNCTION}": (
            _COMPLEXITY_WEIGHT * complex_files / parsed
        ),
    }
    confidence = round(max(0.0, min(1.0, 1.0 - sum(penalties.values()))), 4)
    ranked = [k for k, v in sorted(penalties.items(), key=lambda kv: -kv[1]) if v > 0]
    # the rationale names what cost confidence: whatever did, however little
    main = [k for k in ranked if penalties[k] >= 0.01] or ranked[:1]
    rationale = "; ".join(main[:3]) if main else "no risky calls, documented, simple"
    return AreaScore(
        area=area,
        files=len(reports),
        # what cost confidence is named, so it shows as less than full however little
        confidence=min(confidence, 0.9999) if main else 1.0,
        rationale=rationale,
        strict=any(r.strict for r in reports),
        risky_calls=risky,
        missing_docstrings=missing,
        max_complexity=max((r.max_complexity for r in reports), default=0),
    )
