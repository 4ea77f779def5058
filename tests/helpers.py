"""Object-layer wrappers the tests use to count requests and to inject failures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from a13n_harness.providers.memory import FileFormat

from bucket_memory.log import LOG_PREFIX, Commit, State, key_seq
from bucket_memory.objects import ObjectInfo, ObjectStore, TransientError


class CountingObjectStore:
    """Counts the requests that reach the wrapped store, by operation."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def location(self) -> str:
        return self.inner.location

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    async def get(self, key: str) -> bytes | None:
        self.calls["get"] += 1
        return await self.inner.get(key)

    async def create(self, key: str, data: bytes) -> bool:
        self.calls["create"] += 1
        return await self.inner.create(key, data)

    async def list(self, prefix: str, *, start_after: str | None = None) -> list[ObjectInfo]:
        self.calls["list"] += 1
        return await self.inner.list(prefix, start_after=start_after)

    async def delete(self, keys: Sequence[str]) -> None:
        self.calls["delete"] += 1
        await self.inner.delete(keys)

    async def now(self) -> float:
        return await self.inner.now()


class ScriptedFaults(CountingObjectStore):
    """Fails chosen creates: `before` never reach the store, `lost_reply` land and then report failure."""

    def __init__(self, inner: ObjectStore, *, fail: Callable[[str, int], str | None]) -> None:
        super().__init__(inner)
        self._fail = fail

    async def create(self, key: str, data: bytes) -> bool:
        self.calls["create"] += 1
        match self._fail(key, self.calls["create"]):
            case "before":
                raise TransientError("injected: request failed before reaching the store")
            case "lost_reply":
                await self.inner.create(key, data)
                raise TransientError("injected: the store applied the create, the reply was lost")
        return await self.inner.create(key, data)


async def replay(objects: ObjectStore, fmt: FileFormat | None = None) -> tuple[State, list[Commit]]:
    """Every commit in the log, checked gap-free and chained, and the state they build from empty."""
    state = State(format=fmt or FileFormat())
    commits: list[Commit] = []
    for info in await objects.list(LOG_PREFIX):
        assert key_seq(info.key) == state.head + 1, f"gap or foreign key at {info.key}"
        data = await objects.get(info.key)
        assert data is not None
        commit = Commit.decode(objects.location, info.key, data)
        state.apply(commit, objects.location)
        commits.append(commit)
    return state, commits
