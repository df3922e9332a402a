"""The S3 wire: aioboto3 on asyncio (directly, or in a helper thread under trio).

aioboto3's HTTP layer (aiohttp) needs a running asyncio loop. Under asyncio the
store calls it directly; under trio every call runs on an asyncio loop in a
daemon helper thread (``_loop.py``) behind an anyio blocking portal
(``call_async``), and a trio-side cancellation cancels the asyncio-side task
and waits for it to end, so no call is still in flight after the caller has
moved on. Whether a cancelled PUT
landed on the server is unknowable at that point: callers treat such a write
as "maybe landed" (see ``S3Store.append``).

Retries (connection errors, throttling, 5xx) happen here, with capped
exponential backoff and full jitter; botocore's own retries are off so that a
retried conditional write is visible to the caller as one operation.
Expected outcomes (404, 412) come back as :class:`NotFound` and
:class:`PreconditionFailed`; anything else becomes a named actorflow error.
"""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import sniffio

from actorflow._log import get_logger
from actorflow.errors import StorageError, StoreUnavailableError
from actorflow.storage.s3._loop import LoopThread

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anyio.from_thread import BlockingPortal

__all__ = ["NotFound", "ObjectInfo", "PreconditionFailed", "S3Options", "S3Wire", "drop_idle_lock"]

_log = get_logger(__name__)
T = TypeVar("T")

_THROTTLING = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "TooManyRequests",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
    }
)
_CREDENTIALS = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "ExpiredToken",
        "InvalidToken",
        "InvalidClientTokenId",
        "AuthorizationHeaderMalformed",
    }
)
_EXTRA_HINT = "install the S3 extra: pip install 'actorflow[s3]'"


class NotFound(Exception):
    """The object (or the key an If-Match named) does not exist."""


class PreconditionFailed(Exception):
    """A conditional write (If-None-Match / If-Match) was refused: 412.

    ``found`` describes the object that stood in the way, when the writer
    looked (``S3Objects.put`` does): the fencing checks read its metadata.
    """

    def __init__(self, message: str, found: ObjectInfo | None = None) -> None:
        super().__init__(message)
        self.found = found


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object as HEAD, GET or a listing describes it."""

    key: str
    size: int
    etag: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class S3Options:
    """Connection and retry settings of one S3 store (see ``S3Store``)."""

    bucket: str
    endpoint_url: str | None = None
    region_name: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    aws_session_token: str | None = None
    profile_name: str | None = None
    max_attempts: int = 8
    backoff_base: float = 0.05
    backoff_max: float = 2.0
    max_connections: int = 16
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    client_config: Mapping[str, Any] | None = None


def import_aioboto3() -> Any:
    """Import aioboto3, or explain which extra provides it.

    Raises:
        StoreUnavailableError: aioboto3 is not installed.
    """
    try:
        import aioboto3
    except ImportError as exc:
        raise StoreUnavailableError("open S3 store", f"aioboto3 is missing; {_EXTRA_HINT}") from exc
    return aioboto3


class S3Wire:
    """Bridged, retried S3 calls for one bucket. Opened lazily on first use."""

    def __init__(self, options: S3Options) -> None:
        self.options = options
        self._aioboto3 = import_aioboto3()
        self._client: Any = None
        self._stack: AsyncExitStack | None = None
        self._loop_thread: LoopThread | None = None
        self._portal: BlockingPortal | None = None
        self._lock = anyio.Lock()
        self._closed = False

    @property
    def where(self) -> str:
        """The bucket and endpoint, for messages."""
        return f"bucket {self.options.bucket!r} at {self.options.endpoint_url or 'AWS S3'}"

    # --- lifecycle ------------------------------------------------------------

    async def _ensure_open(self) -> None:
        if self._client is not None:
            return
        async with self._lock:
            if self._is_open():
                return
            if self._closed:
                raise StorageError("use S3 store", "the store is closed; create a new one")
            if sniffio.current_async_library() != "asyncio":
                # One asyncio loop in a helper thread serves every call of this store.
                self._loop_thread = LoopThread("actorflow-s3")
                self._portal = await anyio.to_thread.run_sync(self._loop_thread.start)
            try:
                await self._bridge(self._open_client)
            except BaseException:
                await self._stop_portal()
                raise

    def _is_open(self) -> bool:
        return self._client is not None

    async def _open_client(self) -> None:
        from aiobotocore.config import AioConfig

        o = self.options
        session = self._aioboto3.Session(
            aws_access_key_id=o.aws_access_key_id,
            aws_secret_access_key=o.aws_secret_access_key,
            aws_session_token=o.aws_session_token,
            region_name=o.region_name,
            profile_name=o.profile_name,
        )
        # No response timestamp is used, and parsing them with dateutil is most of
        # the cost of reading a listing (about 50 µs a key; snapshots are listed by key).
        core = getattr(session, "_session", None)
        if core is not None:
            core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
        config = AioConfig(
            max_pool_connections=o.max_connections,
            connect_timeout=o.connect_timeout,
            read_timeout=o.read_timeout,
            retries={"total_max_attempts": 1},
            **dict(o.client_config or {}),
        )
        stack = AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                session.client("s3", endpoint_url=o.endpoint_url, config=config)
            )
            # Fail at once, with a useful message, on a missing bucket or bad credentials.
            await self._retrying("open S3 store", partial(client.head_bucket, Bucket=o.bucket))
        except BaseException:
            await stack.aclose()
            raise
        self._client, self._stack = client, stack

    async def aclose(self) -> None:
        """Close the HTTP client and stop the helper thread. Idempotent."""
        async with self._lock:
            self._closed = True
            stack, self._stack, self._client = self._stack, None, None
            if stack is not None:
                with anyio.CancelScope(shield=True):
                    await self._bridge(stack.aclose)
            await self._stop_portal()

    async def _stop_portal(self) -> None:
        thread, self._loop_thread, self._portal = self._loop_thread, None, None
        if thread is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.stop)

    async def _bridge(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self._portal is None:
            return await fn(*args)
        # A cancelled caller cancels the asyncio-side task and waits for it to end.
        return await self._portal.call_async(fn, *args)

    # --- calls ----------------------------------------------------------------

    async def call(self, operation: str, method: str, **kwargs: Any) -> Any:
        """Run one client method with retries; 404/412 become NotFound/PreconditionFailed."""
        await self._ensure_open()
        return await self._bridge(self._call_on_loop, operation, method, kwargs)

    async def _call_on_loop(self, operation: str, method: str, kwargs: dict[str, Any]) -> Any:
        fn = getattr(self._client, method)
        kwargs = {"Bucket": self.options.bucket, **kwargs}

        async def once() -> Any:
            response = await fn(**kwargs)
            if method == "get_object":
                # Read the body inside the retried call, on the loop that owns the connection.
                async with response["Body"] as stream:
                    response["Body"] = await stream.read()
            return response

        return await self._retrying(operation, once)

    async def _retrying(self, operation: str, once: Callable[[], Awaitable[Any]]) -> Any:
        from botocore.exceptions import ClientError

        attempt = 0
        while True:
            attempt += 1
            try:
                return await once()
            except ClientError as exc:
                outcome = self._classify(operation, exc)
            except Exception as exc:
                outcome = self._classify_transport(operation, exc)
            if isinstance(outcome, Exception):
                raise outcome from outcome.__cause__
            if attempt >= self.options.max_attempts:
                raise outcome.final from outcome.final.__cause__
            delay = min(self.options.backoff_max, self.options.backoff_base * 2**attempt)
            _log.info("s3_retry", operation=operation, attempt=attempt, reason=outcome.reason)
            await anyio.sleep(random.uniform(0, delay))  # full jitter

    def _classify(self, operation: str, exc: Any) -> Exception | _Retry:
        """The error to raise now, or a retry (with the error for when tries run out)."""
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        message = err.get("Message") or code or f"HTTP {status}"
        if status == 412 or code == "PreconditionFailed":
            return _chain(PreconditionFailed(message), exc)
        if code == "NoSuchBucket" or (operation == "open S3 store" and status == 404):
            return _chain(self._missing_bucket(operation), exc)
        if status == 404 or code in ("NoSuchKey", "NotFound"):
            return _chain(NotFound(message), exc)
        if code in _CREDENTIALS or status == 403:
            return _chain(self._refused(operation, code or f"HTTP {status}"), exc)
        if code in _THROTTLING or status >= 500 or status == 429:
            why = f"{code or status}: {message}"
            return _Retry(why, _chain(self._unavailable(operation, why), exc))
        return _chain(
            StorageError(operation, f"S3 {code or status}: {message} ({self.where})"), exc
        )

    def _classify_transport(self, operation: str, exc: Exception) -> Exception | _Retry:
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )
        from botocore.exceptions import (
            HTTPClientError,
            NoCredentialsError,
            PartialCredentialsError,
        )

        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            return _chain(self._refused(operation, "no credentials found"), exc)
        if isinstance(exc, BotoConnectionError | HTTPClientError | OSError):
            why = f"cannot reach it: {exc}"
            return _Retry(why, _chain(self._unavailable(operation, why), exc))
        if isinstance(exc, StorageError):
            return exc
        return _chain(StorageError(operation, f"{type(exc).__name__}: {exc} ({self.where})"), exc)

    def _missing_bucket(self, operation: str) -> StoreUnavailableError:
        return StoreUnavailableError(
            operation,
            f"{self.where} does not exist; create it first "
            f"(e.g. `aws s3 mb s3://{self.options.bucket}`) or fix the bucket name",
        )

    def _refused(self, operation: str, why: str) -> StoreUnavailableError:
        return StoreUnavailableError(
            operation,
            f"{self.where} refused the credentials ({why}); check AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY (or the profile) and the bucket's permissions",
        )

    def _unavailable(self, operation: str, why: str) -> StoreUnavailableError:
        return StoreUnavailableError(
            operation,
            f"{self.where} is unavailable after {self.options.max_attempts} attempts ({why}); "
            "check the endpoint and network, or raise max_attempts",
        )


@dataclass(frozen=True, slots=True)
class _Retry:
    """A failure worth another try; ``final`` is raised when tries run out."""

    reason: str
    final: Exception


def _chain(error: Exception, cause: BaseException) -> Exception:
    error.__cause__ = cause
    return error


def drop_idle_lock(locks: dict[str, anyio.Lock], key: str) -> None:
    """Forget ``key``'s per-run lock unless some task holds it or waits for it."""
    lock = locks.get(key)
    if lock is not None and not lock.locked() and not lock.statistics().tasks_waiting:
        del locks[key]
