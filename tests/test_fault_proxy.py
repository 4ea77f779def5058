"""Every operation ends within its deadline with the right code, through a fault proxy in front of
moto and fake-gcs-server, and leaves no connection or worker thread behind."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.testing.proxy import Fault, FaultProxy, Plan, fault_proxy

from .conftest import BUCKET, unique_prefix
from .helpers import replay

ORIGIN = Origin(run_id="proxy")
REQUEST_TIMEOUT = 0.5
# For faults that close the connection (no request waits on them): a request timeout no busy machine
# trips, where a short one made a slow moto listing time out six times and fail the test.
UNHURRIED = 10.0
OPERATION_TIMEOUT = 3.0
# For a write that must succeed: a busy machine can spend seconds of the deadline making the SDK's
# client (botocore loads its models), and that must not fail a test about what a fault leaves.
PATIENT = 60.0
# A request timeout past the deadline tests' own (pytest's timeout mark, 120 s): against a fault
# that hangs, only the operation's deadline can end the operation before the test times out. So
# those tests prove the deadline by what ends the operation, not by timing it (a busy machine
# stretches any wall-clock bound).
BEYOND_THE_TEST = 600.0
HANGING: list[Fault] = ["never_answers", "drips"]
# 408 and 429 take the path 503 takes (a transient refusal, retried until the deadline): in the
# deadline tests, which each wait out an operation's deadline, they run in `make test-slow`.
REFUSING: list[Fault] = [408, 429, 503]
ALIKE = {408, 429}
CREATES = {"PUT", "POST"}  # S3 PutObject; a GCS upload


def every(fault: Fault) -> Plan:
    return lambda number, method, path: fault


def creates(fault: Fault, *, first: int | None = None) -> Plan:
    """`fault` for creates (the first `first` of them, or all), every other request passed."""
    seen = [0]

    def plan(number: int, method: str, path: str) -> Fault | None:
        if method not in CREATES:
            return None
        seen[0] += 1
        return fault if first is None or seen[0] <= first else None

    return plan


@asynccontextmanager
async def behind_proxy(
    request: pytest.FixtureRequest, backend: str, plan: Plan, *, request_timeout: float = REQUEST_TIMEOUT
) -> AsyncIterator[tuple[ObjectStore, FaultProxy]]:
    """A fresh memory's objects on `backend`, reached through a fault proxy with `plan`."""
    prefix = unique_prefix()
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    if backend == "s3":
        from bucket_memory.objects.s3 import S3ObjectStore

        async with fault_proxy(request.getfixturevalue("s3_endpoint"), plan) as (url, proxy):
            monkeypatch.setenv("AWS_ENDPOINT_URL", url)
            objects = S3ObjectStore(bucket=BUCKET, prefix=prefix, request_timeout=request_timeout)
            try:
                yield objects, proxy
            finally:
                await objects.aclose()
    elif backend == "s3-obstore":
        from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore

        async with fault_proxy(request.getfixturevalue("s3_endpoint"), plan) as (url, proxy):
            monkeypatch.setenv("AWS_ENDPOINT_URL", url)
            yield ObstoreS3ObjectStore(bucket=BUCKET, prefix=prefix, request_timeout=request_timeout), proxy
    else:
        from google.cloud import storage

        from bucket_memory.objects.gcs import GCSObjectStore

        async with fault_proxy(request.getfixturevalue("gcs_endpoint"), plan) as (url, proxy):
            monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
            client = storage.Client()
            try:
                yield GCSObjectStore(client, bucket=BUCKET, prefix=prefix, request_timeout=request_timeout), proxy
            finally:
                client.close()


def store_on(objects: ObjectStore, *, operation_timeout: float = OPERATION_TIMEOUT) -> LogFileStore:
    return LogFileStore(objects, options=LogOptions(operation_timeout=operation_timeout))


async def refused(operation: Callable[[], Awaitable[object]]) -> MemoryStoreError:
    with pytest.raises(MemoryStoreError) as caught:
        await operation()
    return caught.value


async def nothing_left_behind(backend: str, proxy: FaultProxy) -> None:
    """Every connection a hanging fault held was closed by its client, and every GCS worker is free."""
    if proxy.held:
        await proxy.released.wait()
    assert proxy.held == 0
    if backend == "gcs":
        from bucket_memory.objects.gcs import _WORKERS

        # All the workers at once: a thread still stuck on a dripping socket would break the barrier.
        barrier = threading.Barrier(_WORKERS._max_workers, timeout=15)
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(_WORKERS, barrier.wait) for _ in range(_WORKERS._max_workers)))


BACKENDS = ["s3", "s3-obstore", "gcs"]


def hung(fault: Fault) -> float:
    """The request timeout for a deadline test of `fault`: one no attempt meets if the fault hangs."""
    return BEYOND_THE_TEST if fault in HANGING else REQUEST_TIMEOUT


def waiting(faults: list[Fault]) -> list[Any]:
    """The faults of a test that waits out a deadline each, the ones alike in path marked slow."""
    return [pytest.param(fault, marks=pytest.mark.slow) if fault in ALIKE else fault for fault in faults]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", waiting([*HANGING, "cut_body", *REFUSING]), ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_read_through_a_faulty_endpoint_is_unavailable_within_its_deadline(
    backend: str, fault: Fault, request: pytest.FixtureRequest
) -> None:
    async with behind_proxy(request, backend, every(fault), request_timeout=hung(fault)) as (objects, proxy):
        error = await refused(lambda: store_on(objects).list())
        assert error.code == "unavailable"
        assert fault not in HANGING or "within its deadline" in str(error)
        assert proxy.faults  # the requests met the fault
        await nothing_left_behind(backend, proxy)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", waiting([*HANGING, *REFUSING]), ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_write_whose_creates_never_answer_is_unconfirmed_within_its_deadline(
    backend: str, fault: Fault, request: pytest.FixtureRequest
) -> None:
    """The creates may have landed as far as the writer can tell: `write_unconfirmed`, never "not written"."""
    async with behind_proxy(request, backend, creates(fault), request_timeout=hung(fault)) as (objects, proxy):
        error = await refused(lambda: store_on(objects).write("a.md", "a", expected=None, origin=ORIGIN))
        assert error.code == "write_unconfirmed"
        await nothing_left_behind(backend, proxy)
        state, _ = await replay(objects)
        assert state.head == 0  # the proxy never passed a create on


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", ["cut_body", "lose_reply"], ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_create_that_landed_with_its_reply_lost_is_acknowledged_once(
    backend: str, fault: Fault, request: pytest.FixtureRequest
) -> None:
    async with behind_proxy(request, backend, creates(fault), request_timeout=UNHURRIED) as (
        objects,
        proxy,
    ):
        version = await store_on(objects, operation_timeout=PATIENT).write("a.md", "a", expected=None, origin=ORIGIN)
        assert proxy.faults  # every create lost its reply, and the writer read its commit back
        state, commits = await replay(objects)
        assert version == "1" and state.head == 1 and len(commits) == 1
        assert (await store_on(objects).read("a.md")).text == "a"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", [*HANGING, *REFUSING], ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_write_passes_once_the_fault_does(backend: str, fault: Fault, request: pytest.FixtureRequest) -> None:
    async with behind_proxy(request, backend, creates(fault, first=1)) as (
        objects,
        proxy,
    ):
        version = await store_on(objects, operation_timeout=PATIENT).write("a.md", "a", expected=None, origin=ORIGIN)
        assert [f for *_, f in proxy.faults] == [fault]
        state, commits = await replay(objects)
        assert version == "1" and state.head == 1 and len(commits) == 1
        await nothing_left_behind(backend, proxy)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_operation_deadline_bounds_retries_of_slow_requests(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Requests allowed longer than the test would never end in time; the operation's second ends them."""
    async with behind_proxy(request, backend, every("drips"), request_timeout=BEYOND_THE_TEST) as (objects, proxy):
        error = await refused(lambda: store_on(objects, operation_timeout=1.0).read("a.md"))
        assert error.code == "unavailable" and "deadline" in str(error)
        await nothing_left_behind(backend, proxy)


class LostThenUnreadable:
    """The first create of commit 1 lands and loses its reply (aiohttp may send it again); every read
    of commit 1 fails, until `healed`."""

    def __init__(self) -> None:
        self.lost = self.healed = False

    def __call__(self, number: int, method: str, path: str) -> Fault | None:
        if self.healed:
            return None
        if method in CREATES and not self.lost:  # a GCS upload names its object in the body, not the path
            self.lost = True
            return "lose_reply"
        return 503 if method == "GET" and "00000000000000000001" in path else None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_create_that_landed_but_cannot_be_read_back_is_unconfirmed_never_unavailable(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """`unavailable` says nothing was written: a write whose create landed must never end so, even
    when a repeat of the create (by the transport or a retry) is refused by our own commit."""
    plan = LostThenUnreadable()
    async with behind_proxy(request, backend, plan) as (objects, proxy):
        # The SDKs' clients made first, with time to spare: a busy machine can spend the write's whole
        # deadline making them, and then the write ends `unavailable`, truly, before anything is sent.
        await store_on(objects, operation_timeout=PATIENT).list()
        error = await refused(lambda: store_on(objects).write("a.md", "a", expected=None, origin=ORIGIN))
        assert error.code == "write_unconfirmed", error
        assert [fault for *_, fault in proxy.faults][:1] == ["lose_reply"]
        plan.healed = True
        state, commits = await replay(objects)
        assert state.head == 1 and len(commits) == 1
