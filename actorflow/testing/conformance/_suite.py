"""``StoreConformance``: the whole suite as one class that a store's tests subclass."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.testing.conformance._capabilities import CapabilityTests
from actorflow.testing.conformance._event_stream import EventStreamTests
from actorflow.testing.conformance._flow import FlowControlTests
from actorflow.testing.conformance._inbox import InboxTests
from actorflow.testing.conformance._inbox_watch import InboxWatchTests
from actorflow.testing.conformance._log import LogTests
from actorflow.testing.conformance._manifests import ManifestTests, OwnershipTests
from actorflow.testing.conformance._retention import RetentionTests
from actorflow.testing.conformance._snapshots import BlobTests, SnapshotTests

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = ["StoreConformance"]


class StoreConformance(
    ManifestTests,
    LogTests,
    BlobTests,
    SnapshotTests,
    OwnershipTests,
    RetentionTests,
    CapabilityTests,
    InboxTests,
    InboxWatchTests,
    EventStreamTests,
    FlowControlTests,
):
    """Every behaviour the ``Store`` protocol promises, as pytest tests on asyncio and trio.

    The optional capabilities (``UnreadableLister``, ``ClaimInspector``,
    ``SealChecker``, ``SupportsInbox``, ``SupportsInboxWatch``,
    ``SupportsEventStream``, ``QueueSlots``, ``ScheduleStore``) are tested
    where the store offers them, skipped elsewhere. Override the ``reopen`` fixture (see
    :meth:`InboxTests.reopen`) to test that data outlives the store object,
    and ``damage_inbox_entry`` (see :meth:`InboxTests.damage_inbox_entry`) to
    test that a damaged inbox entry is skipped.

    Subclass it in a test module, under a name pytest collects (``TestMyStore``),
    and override the ``store`` fixture: an open, empty store for each test,
    closed after it. Each test runs once per event loop of ``anyio_backend``
    (asyncio and trio; trio's are skipped when trio is not installed), through
    anyio's pytest plugin, which pytest loads whenever anyio is installed.
    Override ``anyio_backend`` to choose the loops, or a test (with
    ``pytest.mark.skip``) to leave it out.

    .. versionadded:: 0.2
    """

    pytestmark = pytest.mark.anyio

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        """The event loops each test runs on: asyncio, and trio when it is installed."""
        if request.param == "trio":
            pytest.importorskip("trio", reason="trio is not installed: pip install trio")
        return str(request.param)

    @pytest.fixture
    def store(self) -> Store:
        """Override it: an open, empty store for one test, closed after it."""
        pytest.fail(
            f"{type(self).__name__} needs a `store` fixture: define one in the class "
            "that yields an open, empty store and closes it afterwards "
            "(docs/storage.md, 'Writing your own store')",
            pytrace=False,
        )
