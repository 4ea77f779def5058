"""An object layer that wraps any backend to count requests and inject faults, deterministically from a seed.

For fault-injection tests and benchmarks: a request can fail before it reaches the store, land and
then lose its reply, be answered with a throttling or conflict status, wait a fixed latency plus a
random delay, or crash the caller (an exception the store never catches, as a process dying would).
A create can also reach the store twice and answer the second time, as aiohttp answers when it sends
an idempotent PUT again after a dropped connection, and a client can lose the store for a burst of
requests in a row (an outage). A `put` is counted (and scripted) by its mode: "create", "update"
(`IfMatch`, `IfHolds`) or "overwrite".
"""

from __future__ import annotations

import asyncio
import builtins
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from a13n_harness.providers.memory import MemoryStoreError

from ..objects.bulk import DestroyableObjectStore, RolledPage, RollingObjectStore
from ..objects.interface import (
    Create,
    IfHolds,
    IfMatch,
    ObjectInfo,
    ObjectStore,
    ObjectVersion,
    Overwrite,
    PutMode,
    Refused,
    RewritableObjectStore,
    TransientError,
    VersionedObjectStore,
    Versioning,
)

type Operation = Literal[
    "get",
    "create",
    "list",
    "delete",
    "list_versions",
    "get_version",
    "has_past",
    "update",
    "delete_version",
    "versioning",
    "overwrite",
    "list_stored",
    "delete_stored",
]
_COUNTED_AS: dict[type[PutMode], Operation] = {
    Create: "create",
    IfMatch: "update",
    IfHolds: "update",
    Overwrite: "overwrite",
}
type Fault = Literal["fail_before", "lose_reply", "resend", "refuse", "unmapped", "crash_before", "crash_after"]


class UnmappedError(Exception):
    """An exception type no error boundary knows: what an SDK upgrade or a library bug can raise."""


class SimulatedCrash(BaseException):
    """The caller died at this point: nothing after it runs, nothing catches it but the test."""


@dataclass(frozen=True, slots=True)
class Faults:
    """Probabilities of each fault per request, and the time a request takes.

    `fail_before` never reaches the store; `lose_reply` (creates and deletes) reaches it and then
    fails; `resend` (creates) reaches it twice and answers what the second attempt got; `refuse`
    answers like a 409, 429 or 503 without reaching it; `unmapped` raises an exception type no
    boundary maps, before the request; `outage` starts a run of `outage_requests` requests (this one
    first) that all fail before reaching the store. A request takes `latency` (with `latency_sigma`,
    a lognormal time whose median it is) plus up to `max_delay`, half before it reaches the store
    and half after. `script`, given the
    operation, key and how many of that operation came before, names a fault for exactly that
    request instead (the crashes are only scripted).
    """

    fail_before: float = 0.0
    lose_reply: float = 0.0
    resend: float = 0.0
    refuse: float = 0.0
    unmapped: float = 0.0
    outage: float = 0.0
    outage_requests: int = 8
    latency: float = 0.0
    latency_sigma: float = 0.0
    max_delay: float = 0.0
    script: Callable[[Operation, str, int], Fault | None] | None = None


@dataclass(frozen=True, slots=True)
class _Request:
    """A request under way: the fault drawn for it, and the half of its time still to wait."""

    fault: Fault | None
    half: float


class FaultyObjectStore:
    """Wraps an object store: counts requests by operation and object bytes, and injects `Faults` drawn from `seed`."""

    def __init__(self, inner: ObjectStore, faults: Faults | None = None, *, seed: int = 0) -> None:
        self.inner = inner
        self.faults = faults or Faults()
        self.calls: Counter[Operation] = Counter()
        self.bytes_sent = 0
        self.bytes_received = 0
        self._random = random.Random(seed)
        self._outage_left = 0

    @property
    def location(self) -> str:
        return self.inner.location

    @property
    def ordered_listing(self) -> bool:
        return self.inner.ordered_listing

    @property
    def requests(self) -> int:
        return sum(self.calls.values())

    async def get(self, key: str) -> bytes | None:
        request = await self._before("get", key)
        found = await self.inner.get(key)
        self.bytes_received += len(found or b"")
        await self._after("get", key, request)
        return found

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        operation = _COUNTED_AS[type(mode)]
        request = await self._before(operation, key)
        self.bytes_sent += len(data)
        refused = await self._send(key, data, mode)
        if request.fault == "resend":  # the transport's second send: its answer is the caller's
            self.bytes_sent += len(data)
            refused = await self._send(key, data, mode)
        # A refusal is a reply like any other: it takes its time back, and can be lost or outlived.
        await self._after(operation, key, request)
        if refused is not None:
            raise refused

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        request = await self._before("list", prefix)
        found = await self.inner.list(prefix, start_after=start_after, limit=limit)
        await self._after("list", prefix, request)
        return found

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage:
        if not isinstance(self.inner, RollingObjectStore):
            raise MemoryStoreError("unavailable", f"{self.location} cannot list rolled up at a delimiter.")
        request = await self._before("list", prefix)
        found = await self.inner.list_rolled(prefix, delimiter, token=token)
        await self._after("list", prefix, request)
        return found

    async def delete(self, keys: Sequence[str]) -> None:
        request = await self._before("delete", keys[0] if keys else "")
        await self.inner.delete(keys)
        await self._after("delete", keys[0] if keys else "", request)

    async def now(self, *, ageing: bool = False) -> float:
        return await self.inner.now(ageing=ageing)

    async def list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        inner = self._versioned()
        request = await self._before("list_versions", prefix)
        found = await inner.list_versions(prefix)
        await self._after("list_versions", prefix, request)
        return found

    async def get_version(self, key: str, version: str) -> bytes | None:
        inner = self._versioned()
        request = await self._before("get_version", key)
        found = await inner.get_version(key, version)
        await self._after("get_version", key, request)
        return found

    async def has_past(self, prefix: str) -> bool:
        if not isinstance(self.inner, VersionedObjectStore):
            return False  # a backend that keeps no versions keeps no past either
        inner = self.inner
        request = await self._before("has_past", prefix)
        found = await inner.has_past(prefix)
        await self._after("has_past", prefix, request)
        return found

    async def delete_version(self, key: str, version: str) -> None:
        inner = self._versioned()
        request = await self._before("delete_version", key)
        await inner.delete_version(key, version)
        await self._after("delete_version", key, request)

    async def versioning(self) -> Versioning:
        inner = self._versioned()
        request = await self._before("versioning", "")
        found = await inner.versioning()
        await self._after("versioning", "", request)
        return found

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        inner = self._destroyable()
        request = await self._before("list_stored", prefix)
        found = await inner.list_stored(prefix)
        await self._after("list_stored", prefix, request)
        return found

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        inner = self._destroyable()
        key = versions[0].key if versions else ""
        request = await self._before("delete_stored", key)
        await inner.delete_stored(versions)
        await self._after("delete_stored", key, request)

    async def _send(self, key: str, data: bytes, mode: PutMode) -> Refused | None:
        """`put` on the inner store, if it keeps `mode` (a `TypeError` if not: the caller's bug); its
        refusal, if it refused."""
        try:
            await self._put_inner(key, data, mode)
        except Refused as refused:
            return refused
        return None

    async def _put_inner(self, key: str, data: bytes, mode: PutMode) -> None:
        match mode:
            case Create():
                await self.inner.put(key, data, mode)
            case IfMatch():
                await self._versioned().put(key, data, mode)
            case IfHolds() if isinstance(self.inner, RewritableObjectStore):
                await self.inner.put(key, data, mode)
            case Overwrite():
                await self._destroyable().put(key, data, mode)
            case _:
                raise TypeError(f"{self.location} does not keep {mode}")

    def _destroyable(self) -> DestroyableObjectStore:
        if not isinstance(self.inner, DestroyableObjectStore):
            raise MemoryStoreError("unavailable", f"{self.location} cannot list and delete what it ever stored.")
        return self.inner

    def _versioned(self) -> VersionedObjectStore:
        if not isinstance(self.inner, VersionedObjectStore):
            raise MemoryStoreError("unavailable", f"{self.location} keeps no object versions.")
        return self.inner

    async def _before(self, operation: Operation, key: str) -> _Request:
        """Count the request, decide its fault, and act out the part that comes before the store."""
        faults = self.faults
        fault = faults.script(operation, key, self.calls[operation]) if faults.script else None
        self.calls[operation] += 1
        if fault is None and self._outage_left:
            self._outage_left -= 1
            fault = "fail_before"
        if fault is None:
            fault = self._draw(operation)
        if fault == "crash_before":
            raise SimulatedCrash(f"crash before {operation} {key}")
        # Half the latency on the way there, half on the way back: the store acts in between.
        half = faults.latency / 2
        if faults.latency_sigma:
            half *= math.exp(self._random.gauss(0.0, faults.latency_sigma))
        delay = half + (self._random.uniform(0, faults.max_delay) if faults.max_delay else 0.0)
        if delay:
            await asyncio.sleep(delay)
        if fault == "fail_before":
            raise TransientError(f"injected: {operation} {key} failed before reaching the store")
        if fault == "unmapped":
            raise UnmappedError(f"injected: {operation} {key} raised an exception nobody mapped")
        if fault == "refuse":
            status = self._random.choice(["409 ConditionalRequestConflict", "429 TooManyRequests", "503 SlowDown"])
            raise TransientError(f"injected: {operation} {key} answered {status}")
        return _Request(fault, half)

    async def _after(self, operation: Operation, key: str, request: _Request) -> None:
        fault = request.fault
        if request.half:
            await asyncio.sleep(request.half)
        if fault == "crash_after":
            raise SimulatedCrash(f"crash after {operation} {key}")
        if fault == "lose_reply":
            raise TransientError(f"injected: {operation} {key} was applied, its reply lost")

    def _draw(self, operation: Operation) -> Fault | None:
        faults, draw = self.faults, self._random.random()
        if draw < faults.outage:
            self._outage_left = faults.outage_requests - 1
            return "fail_before"
        draw -= faults.outage
        if draw < faults.fail_before:
            return "fail_before"
        draw -= faults.fail_before
        if draw < faults.refuse:
            return "refuse"
        draw -= faults.refuse
        if draw < faults.unmapped:
            return "unmapped"
        draw -= faults.unmapped
        if operation in ("create", "delete") and draw < faults.lose_reply:
            return "lose_reply"
        draw -= faults.lose_reply
        if operation == "create" and draw < faults.resend:
            return "resend"
        return None
