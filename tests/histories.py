"""Random clients that record histories for the linearizability checker, and the test bucket around them.

`random_client` reads, lists, follows the change feed, writes (edits of texts long enough that
commits carry edits), moves, deletes, purges once at most, and compacts, as one process of a fleet
would. `Archive` keeps what compaction deletes, so the audit sees every commit ever made;
`TimeWarp` moves the bucket's clock and the writers' together, so that checkpoints age past the
grace period within a test, without ever letting a request last longer than the protocol allows.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from a13n_harness.providers.memory import Changes, FileText, FullResync, MemoryStoreError

from bucket_memory import LogFileStore
from bucket_memory.format.codec import Commit
from bucket_memory.format.wire_values import LOG_PREFIX, key_seq
from bucket_memory.objects.interface import Create, ObjectInfo, ObjectStore

from .linearizability import Done, Failed, Operation, Recorder

PATHS = ("a.md", "b.md", "c.md", "d/e.md")
LINES = 24  # lines of a new file: long enough that changing one is stored as an edit


class Archive:
    """A bucket that keeps a copy of each object it is asked to delete, as versioning would, so that
    the audit reads every commit ever created."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.deleted: dict[str, bytes] = {}
        self.recreated: builtins.list[str] = []  # the deletion hazard, caught

    @property
    def location(self) -> str:
        return self.inner.location

    @property
    def ordered_listing(self) -> bool:
        return self.inner.ordered_listing

    async def get(self, key: str) -> bytes | None:
        return await self.inner.get(key)

    async def put(self, key: str, data: bytes, mode: Create) -> None:
        await self.inner.put(key, data, mode)
        if key in self.deleted:
            self.recreated.append(key)

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        return await self.inner.list(prefix, start_after=start_after, limit=limit)

    async def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            if (data := await self.inner.get(key)) is not None:
                self.deleted.setdefault(key, data)
        await self.inner.delete(keys)

    async def now(self, *, ageing: bool = False) -> float:
        return await self.inner.now(ageing=ageing)

    async def commits(self) -> builtins.list[Commit]:
        """Every commit ever created: those still in the log and those compaction deleted."""
        found = dict(self.deleted)
        for info in await self.inner.list(LOG_PREFIX):
            if (data := await self.inner.get(info.key)) is not None:
                found[info.key] = data
        return [
            Commit.decode(self.location, key, data)
            for key, data in found.items()
            if key.startswith(LOG_PREFIX) and key_seq(key)
        ]


class TimeWarp:
    """The clock of a bucket and of its writers (`clock`, for `LogOptions.clock`), run `offset` ahead.

    Each client reaches the bucket through its own `warped` view, which notes the offset each
    request began at and each object was created at (listings then age objects by the warped
    clock, counting a create as made when its request ended, which errs on the young side).
    `advance` moves time forward, but only once no request in flight would then
    span more than `span` seconds of the warped time: the protocol assumes that requests end well
    within half the grace period, and a jump during a slow request would break that assumption,
    not the protocol.
    """

    def __init__(self) -> None:
        self.offset = 0.0
        self._in_flight: Counter[float] = Counter()  # the offset each request in flight began at
        self._ended = asyncio.Condition()
        self.created: dict[str, float] = {}  # key -> the offset when a create of it last ended

    def clock(self) -> float:
        return time.monotonic() + self.offset

    def warped(self, inner: ObjectStore) -> Warped:
        return Warped(inner, self)

    async def advance(self, step: float, *, span: float) -> None:
        async with self._ended:
            await self._ended.wait_for(lambda: all(begun > self.offset + step - span for begun in +self._in_flight))
            self.offset += step

    async def timed[T](self, request: Callable[[], Awaitable[T]]) -> T:
        begun = self.offset
        self._in_flight[begun] += 1
        try:
            return await request()
        finally:
            self._in_flight[begun] -= 1
            async with self._ended:
                self._ended.notify_all()


class Warped:
    """One client's view of a bucket under a `TimeWarp`: its requests timed, its clock moved."""

    def __init__(self, inner: ObjectStore, warp: TimeWarp) -> None:
        self.inner = inner
        self.warp = warp

    @property
    def location(self) -> str:
        return self.inner.location

    @property
    def ordered_listing(self) -> bool:
        return self.inner.ordered_listing

    async def get(self, key: str) -> bytes | None:
        return await self.warp.timed(lambda: self.inner.get(key))

    async def put(self, key: str, data: bytes, mode: Create) -> None:
        try:
            await self.warp.timed(lambda: self.inner.put(key, data, mode))
        finally:
            self.warp.created[key] = self.warp.offset

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        listed = await self.warp.timed(lambda: self.inner.list(prefix, start_after=start_after, limit=limit))
        return [replace(info, modified=info.modified + self.warp.created.get(info.key, 0.0)) for info in listed]

    async def delete(self, keys: Sequence[str]) -> None:
        await self.warp.timed(lambda: self.inner.delete(keys))

    async def now(self, *, ageing: bool = False) -> float:
        return await self.inner.now(ageing=ageing) + self.warp.offset


async def random_client(
    store: LogFileStore,
    name: str,
    history: list[Operation],
    *,
    seed: int,
    operations: int,
    purge_at: int | None = None,
    warp: TimeWarp | None = None,
) -> None:
    """`operations` random calls on `store`, recorded in `history`; with `warp`, some of them move
    time on by a sixth of the grace period and compact (`purge_at`: the one call that purges)."""
    chooser = random.Random(seed)
    recorder = Recorder(name, history)
    known: dict[str, FileText | None] = {}  # what this client last saw of each file
    cursor: str | None = None
    # Each call's lambda is awaited within its iteration, so late binding cannot bite (B023).
    for index in range(operations):
        path, action = chooser.choice(PATHS), chooser.random()
        seen = known.get(path)
        if index == purge_at:
            if isinstance(await recorder.call("purge", lambda origin: store.purge()), Done):
                known.clear()
        elif action < 0.05 and warp is not None:
            grace = store.options.grace_period
            await warp.advance(grace / 6, span=grace / 3)
            with contextlib.suppress(MemoryStoreError):
                await store.compact()
        elif action < 0.2 or (action >= 0.7 and seen is None):
            outcome = await recorder.call("read", lambda origin: store.read(path), path=path)  # noqa: B023
            if isinstance(outcome, Done) and isinstance(outcome.value, FileText):
                known[path] = outcome.value
            elif isinstance(outcome, Failed) and outcome.code == "not_found":
                known[path] = None
        elif action < 0.3:
            await recorder.call("list", lambda origin: store.list())
        elif action < 0.4:
            since = cursor
            outcome = await recorder.call("changes", lambda origin: store.changes(since), since=since)  # noqa: B023
            if isinstance(outcome, Done) and isinstance(outcome.value, Changes | FullResync):
                cursor = outcome.value.cursor
        elif action < 0.7:
            text = _edited(seen.text if seen is not None else None, f"{name}-{index}", chooser)
            expected = seen.version if seen is not None else None
            outcome = await recorder.call(
                "write",
                lambda origin: store.write(path, text, expected=expected, origin=origin),  # noqa: B023
                path=path,
                text=text,
                expected=expected,
            )
            _learn(known, path, outcome, text)
        elif action < 0.85 and seen is not None:
            destination = chooser.choice([other for other in PATHS if other != path])
            outcome = await recorder.call(
                "move",
                lambda origin: store.move(path, destination, expected=seen.version, origin=origin),  # noqa: B023
                path=path,
                destination=destination,
                expected=seen.version,
            )
            if isinstance(outcome, Done) and isinstance(outcome.value, str):
                known[path], known[destination] = None, FileText(destination, seen.text, outcome.value)
            _learn(known, path, outcome)
        elif seen is not None:
            outcome = await recorder.call(
                "delete",
                lambda origin: store.delete(path, expected=seen.version, origin=origin),  # noqa: B023
                path=path,
                expected=seen.version,
            )
            if isinstance(outcome, Done):
                known[path] = None
            _learn(known, path, outcome)


def _edited(text: str | None, mark: str, chooser: random.Random) -> str:
    """A new text: one line of `text` replaced by `mark` (a new file of `LINES` lines when there is none)."""
    lines = text.splitlines() if text else [f"line {number} of a note that stays the same" for number in range(LINES)]
    lines[chooser.randrange(len(lines))] = f"changed by {mark}"
    return "\n".join(lines) + "\n"


def _learn(known: dict[str, FileText | None], path: str, outcome: object, text: str | None = None) -> None:
    """What a mutation's outcome tells about `path`: its new version, or the file a refusal showed."""
    if isinstance(outcome, Done) and text is not None and isinstance(outcome.value, str):
        known[path] = FileText(path, text, outcome.value)
    elif isinstance(outcome, Failed) and outcome.code in ("version_mismatch", "not_found"):
        known[path] = outcome.current
