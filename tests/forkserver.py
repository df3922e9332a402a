"""Child processes of the crash tests, forked from an interpreter that imported everything.

Most crash and kill tests run ``python -m <child module> ...`` many times, and
each new interpreter spent 0.5-0.9 s importing actorflow, structlog, rich, trio
before doing anything. :func:`popen` starts the same module in a real, separate
process forked from a *zygote*: one interpreter per test session (started on
first use) that has imported those modules and nothing else (no event loop, no
threads, no open stores). The forked process gets its own pid, stdio, working
directory, environment and ``sys.argv``, runs the module as ``__main__`` the
way ``-m`` does, and exits through the interpreter's normal shutdown; the test
signals it (SIGKILL is still a real kill of a real process) and gets its exit
status as ``subprocess.Popen`` reports it.

Whatever an interpreter reads only at startup must match: the zygote serves a
command only when it is ``[sys.executable, "-m", module, *args]`` (or a script's
path instead of ``-m module``) and the
``PYTHON*`` variables and ``ACTORFLOW_LOG_LEVEL`` (read when actorflow is
imported) of its environment equal the zygote's; anything else runs as a plain
``subprocess.Popen``. ``ACTORFLOW_FORKSERVER=0`` turns the zygote off.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, TypeAlias

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = [
    "anyio",
    "trio",
    "msgspec",
    "structlog",
    "actorflow",
    "actorflow.storage",
    "actorflow.storage.file",
    "actorflow.runtime",
    "actorflow.testing",
    # what typer imports when the CLI parses its options (0.3 s); typer itself reads
    # variables when imported, so the child imports it
    "pydantic",
    "pydantic.type_adapter",
    "pydantic.functional_validators",
    "pydantic.fields",
    "pydantic.errors",
]
"""What the zygote imports before it serves: modules that read no environment variable
and start nothing when imported (an optional one that is missing is left out)."""

_STARTUP_KEYS = ("ACTORFLOW_LOG_LEVEL",)


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    """The part of an environment a Python process reads when it starts."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") or k in _STARTUP_KEYS}


def _zygote_env(startup: dict[str, str]) -> dict[str, str]:
    """The environment of a zygote for children whose startup variables are ``startup``."""
    env = {k: v for k, v in os.environ.items() if k not in _startup_env(os.environ.copy())}
    env = {k: v for k, v in env.items() if not k.startswith("ACTORFLOW_")}
    env.update(startup)
    return env


# --- the test's side ---------------------------------------------------------


class ForkedProcess:
    """A forked child, with the part of ``subprocess.Popen``'s interface the tests use."""

    def __init__(
        self,
        args: list[str],
        pid: int,
        status: socket.socket,
        stdin: IO[Any] | None,
        stdout: IO[Any] | None,
        stderr: IO[Any] | None,
    ) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._status = status

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self._status], [], [], 0)
            if ready:
                self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = select.select([self._status], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        data = b""
        while len(data) < 4:
            chunk = self._status.recv(4 - len(data))
            if not chunk:
                raise RuntimeError("the forkserver went away before the child ended")
            data += chunk
        self.returncode = struct.unpack("!i", data)[0]
        self._status.close()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)  # not reaped before the zygote reports it

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Wait for the end, reading stdout and stderr (only what the tests need)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.stdin.close()
        outputs: dict[int, list[bytes]] = {}
        streams = {s.fileno(): s for s in (self.stdout, self.stderr) if s is not None}
        while streams:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(list(streams), [], [], left)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if chunk:
                    outputs.setdefault(fd, []).append(chunk)
                else:
                    streams.pop(fd)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        result: list[Any] = []
        for stream in (self.stdout, self.stderr):
            if stream is None:
                result.append(None)
                continue
            data = b"".join(outputs.get(stream.fileno(), []))
            result.append(data.decode() if "b" not in stream.mode else data)
            stream.close()
        return result[0], result[1]

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdout, self.stderr, self.stdin):
            if stream is not None:
                stream.close()
        self.wait()


class _Zygote:
    def __init__(self, startup: dict[str, str], path0: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = _zygote_env(startup)
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), path0],
            cwd=path0,
            env=env,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.control = ours
        self.lock = threading.Lock()
        ready = self.control.recv(5)
        if ready != b"ready":
            raise RuntimeError("the forkserver did not start")

    def spawn(self, request: dict[str, Any], fds: list[int]) -> tuple[int, socket.socket]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            payload = json.dumps(request).encode()
            with self.lock:
                self.control.sendmsg(
                    [struct.pack("!I", len(payload)), payload],
                    [
                        (
                            socket.SOL_SOCKET,
                            socket.SCM_RIGHTS,
                            array.array("i", [theirs.fileno(), *fds]),
                        )
                    ],
                )
        finally:
            theirs.close()
        data = b""
        while len(data) < 4:
            chunk = ours.recv(4 - len(data))
            if not chunk:
                raise RuntimeError("the forkserver did not fork")
            data += chunk
        return struct.unpack("!i", data)[0], ours

    def close(self) -> None:
        self.control.close()  # the zygote exits at end of file
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


Child: TypeAlias = "ForkedProcess | subprocess.Popen[Any]"
"""What :func:`popen` returns."""

_zygotes: dict[tuple[str, tuple[tuple[str, str], ...]], _Zygote] = {}
"""One zygote per first entry of ``sys.path`` and set of startup variables (a few)."""
_zygote_lock = threading.Lock()


def _get_zygote(startup: dict[str, str], path0: str) -> _Zygote:
    key = (path0, tuple(sorted(startup.items())))
    with _zygote_lock:
        if key not in _zygotes:
            _zygotes[key] = zygote = _Zygote(startup, path0)
            atexit.register(zygote.close)
        return _zygotes[key]


def _servable(args: list[str], env: dict[str, str] | None, kwargs: dict[str, Any]) -> bool:
    if os.environ.get("ACTORFLOW_FORKSERVER") == "0" or kwargs:
        return False
    if len(args) < 2 or args[0] != sys.executable:
        return False
    if args[1] == "-m":
        return len(args) >= 3
    return args[1].endswith(".py")


def popen(
    args: list[str],
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
    **kwargs: Any,
) -> Child:
    """``subprocess.Popen(args, ...)``, forked from the zygote when it can serve ``args``."""
    if not _servable(args, env, kwargs):
        return subprocess.Popen(
            args, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, text=text, **kwargs
        )
    child_fds: list[int] = []
    ours: list[IO[Any] | None] = []
    to_close: list[int] = []
    devnull = None
    try:
        for which, spec in enumerate((stdin, stdout, stderr)):
            if spec is None:
                child_fds.append(which)
                ours.append(None)
            elif spec == subprocess.DEVNULL:
                if devnull is None:
                    devnull = os.open(os.devnull, os.O_RDWR)
                child_fds.append(devnull)
                ours.append(None)
            elif spec == subprocess.PIPE:
                read, write = os.pipe()
                if which == 0:
                    child_fds.append(read)
                    to_close.append(read)
                    ours.append(os.fdopen(write, "w" if text else "wb"))
                else:
                    child_fds.append(write)
                    to_close.append(write)
                    ours.append(os.fdopen(read, "r" if text else "rb"))
            elif spec == subprocess.STDOUT and which == 2:
                child_fds.append(child_fds[1])
                ours.append(None)
            else:
                child_fds.append(spec if isinstance(spec, int) else spec.fileno())
                ours.append(None)
        folder = os.path.abspath(cwd if cwd is not None else os.getcwd())
        child_env = dict(os.environ if env is None else env)
        request = {"args": args[1:], "cwd": folder, "env": child_env}
        # what a new interpreter would put first on sys.path: the zygote imports with it
        path0 = folder if args[1] == "-m" else os.path.dirname(os.path.join(folder, args[1]))
        pid, status = _get_zygote(_startup_env(child_env), path0).spawn(request, child_fds)
    except BaseException:
        for stream in ours:
            if stream is not None:
                stream.close()
        raise
    finally:
        for fd in to_close:
            os.close(fd)
        if devnull is not None:
            os.close(devnull)
    return ForkedProcess(args, pid, status, *ours)


def run(
    args: list[str],
    *,
    capture_output: bool = False,
    text: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(args, ...)``, forked from the zygote when it can serve ``args``."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    process = popen(args, text=text, **kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException:
        process.kill()
        process.wait()
        raise
    returncode = process.wait()
    if check and returncode:
        raise subprocess.CalledProcessError(returncode, args, stdout, stderr)
    return subprocess.CompletedProcess(args, returncode, stdout, stderr)


# --- the zygote's side -------------------------------------------------------


def _serve(control_fd: int) -> dict[str, Any]:
    """Fork a child per request; in the child, return its request (the zygote never returns)."""
    control = socket.socket(fileno=control_fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the test session is for pytest
    children: dict[int, socket.socket] = {}
    control.sendall(b"ready")

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            reporter = children.pop(pid, None)
            if reporter is not None:
                with contextlib.suppress(OSError):
                    reporter.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
                reporter.close()

    while True:
        try:
            ready, _, _ = select.select([control.fileno(), wake_read], [], [])
        except InterruptedError:
            continue
        if wake_read in ready:
            os.read(wake_read, 4096)
        reap()
        if control.fileno() not in ready:
            continue
        header, fds, _, _ = socket.recv_fds(control, 4, 4)
        if not header:
            for reporter in children.values():
                reporter.close()
            os._exit(0)
        (size,) = struct.unpack("!I", header)
        payload = b""
        while len(payload) < size:
            payload += control.recv(size - len(payload))
        request = json.loads(payload)
        reporter_fd, stdio = fds[0], fds[1:]
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for target, fd in enumerate(stdio):
                os.dup2(fd, target)
            # nothing of the zygote's stays open: the sockets are let go of, then
            # every descriptor above stdio is closed
            for reporter in children.values():
                reporter.detach()
            control.detach()
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            return dict(request)
        reporter = socket.socket(fileno=reporter_fd)
        for fd in stdio:
            os.close(fd)
        children[pid] = reporter
        reporter.sendall(struct.pack("!i", pid))


def _run_child(request: dict[str, Any]) -> None:
    """In the forked child: become ``python -m <module> <args>`` (or ``python <script>
    <args>``) in the request's cwd and environment."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    first, *args = request["args"]
    if first == "-m":
        module, *args = args
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [first, *args]
        runpy.run_path(first, run_name="__main__")


if __name__ == "__main__":
    import importlib

    # run as a script: sys.path starts as the children's will (their folder or script's folder)
    sys.path[0] = sys.argv[2]
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    _request = _serve(int(sys.argv[1]))
    # only a forked child gets here, with the zygote's frames gone
    _run_child(_request)
