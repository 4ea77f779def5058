"""Workers that race in separate OS processes on one memory, and the harness that starts them together."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable, Sequence
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from a13n_harness.providers.memory import FileText, MemoryStoreError, Origin

from bucket_memory import LogFileStore, open_store

RETRIABLE = ("version_mismatch", "read_conflict")


def run_processes(target: Callable[..., object], arguments: Sequence[tuple[object, ...]]) -> list[object]:
    """Run `target(barrier, queue, *args)` once per argument tuple, each in its own spawned process."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(arguments))
    results = context.Queue()
    processes = [context.Process(target=target, args=(barrier, results, *args)) for args in arguments]
    for process in processes:
        process.start()
    collected = [results.get(timeout=240) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0, f"a racing process failed with exit code {process.exitcode}"
    failures = [result for result in collected if isinstance(result, str)]
    assert not failures, failures
    return collected


def increment(barrier: Barrier, results: multiprocessing.Queue[object], url: str, rounds: int) -> None:
    """Read-modify-write `counter` `rounds` times, retrying lost compare-and-swaps; report the retries.

    Every round all processes read, meet at the barrier, then write: each round is a real race.
    """
    _report(results, lambda: _increment(barrier, url, rounds))


async def _increment(barrier: Barrier, url: str, rounds: int) -> int:
    origin = Origin(run_id=f"increment-{os.getpid()}")
    retries = 0
    async with open_store(url) as store:
        for _ in range(rounds):
            current = await _read(store, "counter")
            barrier.wait()
            while True:
                value = int(current.text) if current is not None else 0
                expected = current.version if current is not None else None
                try:
                    await store.write("counter", str(value + 1), expected=expected, origin=origin)
                    break
                except MemoryStoreError as error:
                    if error.code not in RETRIABLE:
                        raise
                    retries += 1
                    current = error.current
            barrier.wait()
    return retries


def toggle(
    barrier: Barrier, results: multiprocessing.Queue[object], url: str, mine: str, other: str, rounds: int
) -> None:
    """Turn `mine` on only while `other` is off (read as a dependency), and off again; report commits.

    All processes read, meet at the barrier, then write, so every round races the two decisions.
    """
    _report(results, lambda: _toggle(barrier, url, mine, other, rounds))


async def _toggle(barrier: Barrier, url: str, mine: str, other: str, rounds: int) -> int:
    origin = Origin(run_id=f"toggle-{os.getpid()}")
    committed = 0
    async with open_store(url) as store:
        for _ in range(rounds):
            own, theirs = await store.read(mine), await store.read(other)
            barrier.wait()
            if own.text == "on" or theirs.text == "off":
                text = "off" if own.text == "on" else "on"
                try:
                    await store.write(
                        mine, text, expected=own.version, origin=origin, dependencies={other: theirs.version}
                    )
                    committed += 1
                except MemoryStoreError as error:
                    if error.code not in RETRIABLE:
                        raise
            barrier.wait()
    return committed


async def _read(store: LogFileStore, path: str) -> FileText | None:
    try:
        return await store.read(path)
    except MemoryStoreError as error:
        if error.code != "not_found":
            raise
        return None


def _report(results: multiprocessing.Queue[object], work: Callable[[], object]) -> None:
    try:
        results.put(asyncio.run(work()))  # type: ignore[arg-type]
    except BaseException as error:
        results.put(f"{type(error).__name__}: {error}")


def write_through_a_wipe(
    barrier: Barrier, results: multiprocessing.Queue[object], url: str, name: str, rounds: int
) -> None:
    """Write `name/<n>.md` for n in `rounds`, with a warm store; meet the test at the barrier halfway
    twice (it wipes the prefix in between), then write on while it recovers. Report what was
    acknowledged: (path, text) pairs whose write returned a version."""
    _report(results, lambda: _write_through_a_wipe(barrier, url, name, rounds))


async def _write_through_a_wipe(barrier: Barrier, url: str, name: str, rounds: int) -> list[tuple[str, str]]:
    origin = Origin(run_id=f"wipe-{name}")
    acknowledged: list[tuple[str, str]] = []
    async with open_store(url) as store:
        await store.list()
        barrier.wait()  # everyone warm
        for n in range(rounds):
            if n == rounds // 2:
                barrier.wait()  # the test wipes the prefix now
                barrier.wait()  # and recovers from here on, while we write
            path, text = f"{name}/{n:03d}.md", f"{name} {n}\n"
            try:
                await store.write(path, text, expected=None, origin=origin)
            except MemoryStoreError as error:
                # A deleted memory, a half-restored one, or a write that may not have landed: all
                # allowed while recovery runs, as long as an acknowledged write is never lost.
                if error.code not in ("memory_deleted", "unavailable", "write_unconfirmed", *RETRIABLE):
                    raise
                continue
            acknowledged.append((path, text))
    return acknowledged


def random_history(
    barrier: Barrier,
    results: multiprocessing.Queue[object],
    url: str,
    name: str,
    seed: int,
    operations: int,
    layer: str = "aiobotocore",
) -> None:
    """Run `histories.random_client` on the memory at `url` (an S3 one through `layer`) under the
    linearizability suite's faults, all processes starting together; report the recorded history."""
    _report(results, lambda: _random_history(barrier, url, name, seed, operations, layer))


async def _random_history(
    barrier: Barrier, url: str, name: str, seed: int, operations: int, layer: str
) -> list[object]:
    from bucket_memory.objects.interface import ObjectStore
    from bucket_memory.objects.local import LocalObjectStore
    from bucket_memory.objects.s3 import S3ObjectStore
    from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore
    from bucket_memory.objects.urls import parse_url
    from bucket_memory.testing.faults import FaultyObjectStore

    from .histories import random_client
    from .linearizability import Operation
    from .test_linearizable import FAULTS, OPTIONS

    where = parse_url(url)
    objects: ObjectStore = LocalObjectStore(url)
    if where.scheme == "s3":
        layers = {"aiobotocore": S3ObjectStore, "obstore": ObstoreS3ObjectStore}
        objects = layers[layer](bucket=where.bucket, prefix=where.prefix)
    history: list[Operation] = []
    store = LogFileStore(FaultyObjectStore(objects, FAULTS, seed=seed), options=OPTIONS)
    barrier.wait()
    await random_client(store, name, history, seed=seed, operations=operations)
    await store.settle()
    if isinstance(objects, S3ObjectStore):
        await objects.aclose()
    return list(history)


def first_writes(barrier: Barrier, results: multiprocessing.Queue[object], urls: Sequence[str], name: str) -> None:
    """For each new memory in `urls`: meet the others at the barrier, then cold-open it and write
    `name.md`, as a fleet's first deploy does. Report "ok" or the error code, per memory."""
    _report(results, lambda: _first_writes(barrier, urls, name))


async def _first_writes(barrier: Barrier, urls: Sequence[str], name: str) -> list[str]:
    outcomes = []
    for url in urls:
        barrier.wait()
        async with open_store(url) as store:
            try:
                await store.write(f"{name}.md", name, expected=None, origin=Origin(run_id=name))
                outcomes.append("ok")
            except MemoryStoreError as error:
                outcomes.append(error.code)
    return outcomes


def erase_or_write(barrier: Barrier, results: multiprocessing.Queue[object], url: str, role: str, rounds: int) -> None:
    """Either erase `people/alice.md`, now `archive/alice.md` ("erase"), or, as an agent whose reads hold its text,
    write `role/<n>.md` and append to that file from its last read, until it has seen the file gone
    `rounds` times (or 200 writes). Report what was acknowledged: (path, text) pairs, the erasure's
    seq for the eraser."""
    _report(results, lambda: _erase_or_write(barrier, url, role, rounds))


async def _erase_or_write(barrier: Barrier, url: str, role: str, rounds: int) -> object:
    from bucket_memory import LogOptions, MemoryAdmin

    options = LogOptions(checkpoint_min_commits=2, checkpoint_max_commits=3)  # checkpoints while it erases
    async with open_store(url, options=options) as store:
        held = await _read(store, "archive/alice.md")
        barrier.wait()
        if role == "erase":
            erased = await MemoryAdmin(store).erase(
                "people/alice.md", origin=Origin(run_id="erase", principal_id="dpo")
            )
            return erased.erasure
        acknowledged: list[tuple[str, str]] = []
        origin = Origin(run_id=f"agent-{role}")
        gone = 0
        for n in range(200):
            path, text = f"{role}/{n:03d}.md", f"{role} {n}\n"
            await store.write(path, text, expected=None, origin=origin)
            acknowledged.append((path, text))
            if held is None:
                gone += 1
                if gone >= rounds:
                    break
                held = await _read(store, "archive/alice.md")
                continue
            try:  # an append to the text this agent last read, which still holds the secret
                version = await store.write(
                    held.path, held.text + f"\n{role} {n}", expected=held.version, origin=origin
                )
                held = FileText(path=held.path, text=held.text + f"\n{role} {n}", version=version)
            except MemoryStoreError as error:
                if error.code not in ("version_mismatch", "not_found"):
                    raise
                held = await _read(store, "archive/alice.md")
        await store.settle()
        return acknowledged


def erase_killed_at(url: str, kill_at: int, before: bool) -> None:
    """Erase `people/alice.md`, and SIGKILL this process at its `kill_at`-th request that changes an
    object (a create, rewrite, conditional replace or version deletion), `before` it is sent or just
    after it landed: kill -9 at that point."""
    import signal

    from bucket_memory import LogOptions, MemoryAdmin
    from bucket_memory.objects.local import LocalObjectStore
    from bucket_memory.objects.s3 import S3ObjectStore

    sent = 0

    def killing(method: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal sent
            sent += 1
            number = sent  # requests run several at a time: this one's number, not the latest
            if number == kill_at and before:
                os.kill(os.getpid(), signal.SIGKILL)
            answer = await method(*args, **kwargs)
            if number == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return answer

        return call

    for cls, names in (
        (S3ObjectStore, ("put", "delete_version")),
        (LocalObjectStore, ("put",)),
    ):
        for name in names:
            setattr(cls, name, killing(getattr(cls, name)))

    async def erase() -> None:
        async with open_store(url, options=LogOptions(checkpoint_min_commits=2, checkpoint_max_commits=3)) as store:
            await MemoryAdmin(store).erase("people/alice.md", origin=Origin(run_id="erase", principal_id="dpo"))

    asyncio.run(erase())


def fleet_writer_killed(url: str, name: str, kill_under: str) -> None:
    """Write `<name>.md` through an intent (as a process that just lost a race would), and SIGKILL
    this process just after its first create under `kill_under` lands ("pending/": its intent
    published; "log/": a commit of its fold landed, before anything after it ran): kill -9 there."""
    import signal

    from bucket_memory.objects.interface import Create, IfHolds, Overwrite
    from bucket_memory.objects.local import LocalObjectStore

    put = LocalObjectStore.put

    async def killing(self: LocalObjectStore, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        await put(self, key, data, mode)
        if isinstance(mode, Create) and key.startswith(kill_under) and not key.endswith(".run.json"):
            os.kill(os.getpid(), signal.SIGKILL)

    LocalObjectStore.put = killing  # type: ignore[method-assign]

    async def write() -> None:
        async with open_store(url) as store:
            await store.list()
            store._log.head.traffic.lost_at = store.options.clock()  # contended: through an intent
            await store.write(f"{name}.md", name, expected=None, origin=Origin(run_id=name, tool_call_id=name))

    asyncio.run(write())


def recover_after_an_erase(url: str, listed: Event, go: Event, kill_at: int | None) -> None:
    """`recover` that, once it has listed the stored versions, sets `listed` and waits for `go`
    (an erase runs meanwhile in another process); SIGKILLed at its `kill_at`-th request that
    changes an object, just after it landed (None: it runs to the end)."""
    import signal

    from bucket_memory import LogOptions, MemoryAdmin
    from bucket_memory.history.versions import StoredVersions
    from bucket_memory.objects.s3 import S3ObjectStore

    original = StoredVersions.listed.__func__  # type: ignore[attr-defined]

    async def pausing(cls: Any, objects: Any, format: Any, prefix: str = "") -> StoredVersions:
        found: StoredVersions = await original(cls, objects, format, prefix)
        if prefix == "" and not listed.is_set():
            listed.set()
            await asyncio.to_thread(go.wait)
        return found

    StoredVersions.listed = classmethod(pausing)  # type: ignore[method-assign, assignment]
    sent = 0

    def killing(method: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal sent
            sent += 1
            number = sent
            answer = await method(*args, **kwargs)
            if number == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return answer

        return call

    for name in ("put", "delete_version"):
        setattr(S3ObjectStore, name, killing(getattr(S3ObjectStore, name)))

    async def recover() -> None:
        async with open_store(url, options=LogOptions(checkpoint_min_commits=2, checkpoint_max_commits=3)) as store:
            await MemoryAdmin(store).recover(None, origin=Origin(run_id="recover", principal_id="operator"))

    try:
        asyncio.run(recover())
    except MemoryStoreError as error:  # a version it listed vanished: it says so and exits 1
        print(f"recover: {error}", flush=True)
        raise SystemExit(1) from None
