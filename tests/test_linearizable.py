"""Every read fresh, every outcome true: random histories under faults, checked for linearizability.

Clients (stores of one memory, as processes of a fleet) run random operations while requests fail,
lose their replies, reach the bucket twice, meet outages and raise exceptions nobody mapped, and
while checkpoints and compaction run; the checker then places every operation on the log
(`tests/linearizability.py`). The checker's own tests first: each history it must refuse.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Changes, FileEntry, FileText, FullResync, Origin

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.format.changes import Change, Delete, Move, Write
from bucket_memory.format.codec import GENESIS_HASH, Commit
from bucket_memory.format.wire_values import LOG_PREFIX, key_seq, log_key
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.faults import Faults, FaultyObjectStore

from .conftest import BUCKET, unique_prefix
from .helpers import replay
from .histories import Archive, TimeWarp, random_client
from .linearizability import Done, Failed, Operation, Unconfirmed, check
from .races import random_history, run_processes

FAULTS = Faults(
    fail_before=0.05, lose_reply=0.08, resend=0.03, refuse=0.03, unmapped=0.02, outage=0.01, max_delay=0.001
)
FOLDED: list[int] = []  # per history checked: the intents its commits settled
OPTIONS = LogOptions(
    checkpoint_min_commits=3,
    checkpoint_max_commits=9,
    retain_commits=5,
    retain_seconds=0,
    grace_period=60,
    request_attempts=4,
)


def log(*changes: Sequence[Change]) -> list[Commit]:
    """Commits carrying the given changes, one commit per argument, chained from seq 1."""
    commits: list[Commit] = []
    for seq, made in enumerate(changes, start=1):
        prev = commits[-1].hash if commits else GENESIS_HASH
        commits.append(Commit.create(seq, prev, tuple(made), Origin(), at=0.0))
    return commits


def by(op_id: str) -> Origin:
    return Origin(tool_call_id=op_id)


def write(op_id: str, path: str, text: str, start: float, end: float, outcome: object, **fields: Any) -> Operation:
    result = outcome if isinstance(outcome, Done | Failed | Unconfirmed) else Done(outcome)
    return Operation(op_id, "c", "write", start, end, result, path=path, text=text, **fields)


def read(op_id: str, path: str, start: float, end: float, seen: FileText | None) -> Operation:
    outcome = Done(seen) if seen is not None else Failed("not_found")
    return Operation(op_id, "r", "read", start, end, outcome, path=path)


ONE_WRITE = log([Write(path="a", text="1", origin=by("w1"))])


def test_a_history_that_is_linearizable_passes() -> None:
    commits = log([Write(path="a", text="1", origin=by("w1"))], [Move(source="a", destination="b", origin=by("m"))])
    history = [
        read("r0", "a", 0, 1, None),
        write("w1", "a", "1", 0.5, 2, "1"),
        read("r1", "a", 1.5, 3, FileText("a", "1", "1")),  # overlaps the write: either answer is right
        Operation("m", "c", "move", 3, 4, Done("2"), path="a", destination="b", expected="1"),
        Operation("l", "r", "list", 5, 6, Done([FileEntry("b", "2", 1, None)])),
        Operation("f", "r", "changes", 5, 6, Done(Changes("2~x", ("a", "b"))), since="0"),
    ]
    assert check(history, commits) == []


def test_a_stale_read_is_found() -> None:
    history = [write("w1", "a", "1", 0, 1, "1"), read("r", "a", 2, 3, None)]
    assert "never held after commit 1" in " ".join(check(history, ONE_WRITE))


def test_reads_that_go_back_in_time_are_found() -> None:
    commits = log([Write(path="a", text="1", origin=by("w1"))])
    history = [
        write("w1", "a", "1", 0, 10, Unconfirmed()),
        read("r1", "a", 1, 2, FileText("a", "1", "1")),
        read("r2", "a", 3, 4, None),  # began after r1 saw the write, and missed it
    ]
    assert len(check(history, commits)) == 1


def test_a_lost_acknowledged_write_is_found() -> None:
    assert "not in the log" in " ".join(check([write("w2", "a", "2", 0, 1, "2")], ONE_WRITE))


def test_a_write_that_raised_but_landed_is_found() -> None:
    history = [write("w1", "a", "1", 0, 1, Failed("unavailable"))]
    assert "raised unavailable, yet it happened" in check(history, ONE_WRITE)[0]


def test_an_unconfirmed_write_may_land_or_not() -> None:
    assert check([write("w1", "a", "1", 0, math.inf, Unconfirmed())], ONE_WRITE) == []
    assert check([write("w9", "a", "9", 0, math.inf, Unconfirmed())], ONE_WRITE) == []


def test_commits_out_of_real_time_order_are_found() -> None:
    commits = log([Write(path="a", text="1", origin=by("w1"))], [Write(path="b", text="2", origin=by("w2"))])
    history = [write("w2", "b", "2", 0, 1, "2"), write("w1", "a", "1", 2, 3, "1")]
    assert "acknowledged before it began" in " ".join(check(history, commits))


def test_a_write_over_a_version_it_did_not_expect_is_found() -> None:
    commits = log([Write(path="a", text="1", origin=by("w1"))], [Write(path="a", text="2", origin=by("w2"))])
    history = [write("w1", "a", "1", 0, 1, "1"), write("w2", "a", "2", 2, 3, "2", expected=None)]
    assert "expected version None" in " ".join(check(history, commits))


def test_a_mutation_applied_twice_is_found() -> None:
    commits = log([Write(path="a", text="1", origin=by("w1"))], [Delete(path="a", origin=by("w1"))])
    assert "twice" in " ".join(check([write("w1", "a", "1", 0, 1, "1")], commits))


def test_a_refusal_that_shows_the_expected_version_is_found() -> None:
    history = [write("w2", "a", "2", 2, 3, Failed("version_mismatch", FileText("a", "1", "1")), expected="1")]
    assert "shown the version it expected" in check(history, ONE_WRITE)[0]


def test_a_change_feed_that_misses_a_change_is_found() -> None:
    commits = log([Write(path="a", text="1", origin=by("w1"))], [Write(path="b", text="2", origin=by("w2"))])
    history = [
        write("w1", "a", "1", 0, 1, "1"),
        write("w2", "b", "2", 0, 1, "2"),
        Operation("f", "r", "changes", 2, 3, Done(Changes("2~x", ("b",))), since="0"),
        Operation("g", "r", "changes", 2, 3, Done(FullResync("2~x")), since="1~x"),
    ]
    problems = check(history, commits)
    assert len(problems) == 2 and "not ['a', 'b']" in problems[0] and "full resync" in problems[1]


def test_an_exception_outside_the_contract_is_found() -> None:
    assert (
        "raised raw" in check([read("r", "a", 0, 1, None), Operation("x", "c", "read", 0, 1, Failed("raw X"))], [])[0]
    )


# The suite itself.


async def run_random(objects: ObjectStore, seed: int, *, clients: int, operations: int) -> int:
    """Race `clients` stores of one memory with random operations under faults; check the history.
    Returns how many operations it checked; `FOLDED` counts the intents the log's commits settled."""
    archive, warp = Archive(objects), TimeWarp()
    options = replace(OPTIONS, clock=warp.clock)
    stores = [
        LogFileStore(warp.warped(FaultyObjectStore(archive, FAULTS, seed=seed * 100 + number)), options=options)
        for number in range(clients)
    ]
    history: list[Operation] = []
    await asyncio.gather(
        *(
            random_client(
                store,
                f"c{number}",
                history,
                seed=seed * 100 + number,
                operations=operations,
                purge_at=operations // 2 if number == 0 and seed % 4 == 0 else None,
                warp=warp,
            )
            for number, store in enumerate(stores)
        )
    )
    for store in stores:
        await store.settle()
    assert [key for key in archive.recreated if key.startswith(LOG_PREFIX) and key_seq(key)] == [], (
        "compacted commits were created again"
    )
    commits = await archive.commits()
    audit = MemoryObjectStore("audit")
    audit.objects = {log_key(commit.seq): (commit.encode(), 0.0) for commit in commits}
    state, _ = await replay(audit)  # gap-free and hash-chained from seq 1
    problems = check(history, commits)
    assert not problems, "\n".join(problems[:20])
    FOLDED.append(sum(len(commit.folded or ()) for commit in commits))
    fresh = LogFileStore(objects)
    assert {entry.path: entry.version for entry in await fresh.list()} == {
        path: str(live.version) for path, live in state.files.items()
    }
    return len(history)


@pytest.fixture(params=["memory", "local", "s3", pytest.param("s3-obstore", marks=pytest.mark.slow)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], ObjectStore]:
    """Makes a fresh memory's objects on the backend."""
    match request.param:
        case "memory":
            return MemoryObjectStore
        case "local":
            return lambda: LocalObjectStore(tmp_path / unique_prefix())
        case "s3-obstore":
            request.getfixturevalue("s3_endpoint")
            from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore

            return lambda: ObstoreS3ObjectStore(bucket=BUCKET, prefix=unique_prefix())
        case _:
            request.getfixturevalue("s3_endpoint")
            from bucket_memory.objects.s3 import S3ObjectStore

            return lambda: S3ObjectStore(bucket=BUCKET, prefix=unique_prefix())


@pytest.mark.parametrize("seed", range(3))
async def test_random_histories_are_linearizable(backend: Callable[[], ObjectStore], seed: int) -> None:
    assert await run_random(backend(), seed, clients=4, operations=40) > 120


async def test_random_histories_through_obstore_are_linearizable(s3_endpoint: str) -> None:
    """One seed on the `fast` extra's layer in `make test` (every seed in `make test-slow`)."""
    from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore

    assert (
        await run_random(ObstoreS3ObjectStore(bucket=BUCKET, prefix=unique_prefix()), 0, clients=4, operations=40) > 120
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 203))
async def test_random_histories_are_linearizable_at_scale(backend: Callable[[], ObjectStore], seed: int) -> None:
    await run_random(backend(), seed, clients=5, operations=60)


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.slow), "s3-mixed"])
async def test_racing_processes_stay_linearizable(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The same, in separate OS processes (no compaction: their clocks are real). "s3-mixed" is a
    fleet half on aiobotocore and half on obstore, as one mid-way through adopting the `fast` extra
    (all on aiobotocore in `make test-slow`)."""
    if where.startswith("s3"):
        request.getfixturevalue("s3_endpoint")
        url = f"s3://{BUCKET}/{unique_prefix()}"
    else:
        url = str(tmp_path / "memory")
    layers = ["aiobotocore", "obstore"] if where == "s3-mixed" else ["aiobotocore"]
    histories = run_processes(
        random_history, [(url, f"p{number}", number, 40, layers[number % len(layers)]) for number in range(4)]
    )
    history = [operation for ops in histories for operation in ops]  # type: ignore[attr-defined]
    from bucket_memory import open_store

    async with open_store(url) as store:
        _, commits = await replay(store.objects)
    problems = check(history, commits)
    assert not problems, "\n".join(problems[:20])
