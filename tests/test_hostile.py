"""Nothing a caller or a bucket holds can take a shared memory down: one regression test per case found.

Each test names the case of the hostile-input issue it pins; the closing note of that issue says
what each did before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import regex
from a13n_harness.providers.memory import Changes, FullResync, MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.cli import app
from bucket_memory.files import search as search_module
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.codec import Commit
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.wire_values import log_key
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.objects.server_clock import ServerClock
from bucket_memory.testing.faults import Faults, FaultyObjectStore

from .helpers import CliRunner, replay

ORIGIN = Origin(run_id="run", principal_id="me", tool_call_id="call")


@pytest.mark.parametrize(
    "bad",
    [
        Origin(run_id=7),  # type: ignore[arg-type]
        Origin(principal_id=uuid.uuid4()),  # type: ignore[arg-type]
        Origin(tool_call_id="\ud800"),
        Origin(run_id="x" * 5000),
        Origin(run_id="line\nbreak"),
        "not an origin",
    ],
)
async def test_a_bad_origin_fails_its_caller_alone(bad: Origin) -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(FaultyObjectStore(objects, Faults(latency=0.001)))
    await store.write("seed.md", "seed", expected=None, origin=ORIGIN)
    results = await asyncio.gather(
        store.write("a.md", "a", expected=None, origin=ORIGIN),
        store.write("bad.md", "bad", expected=None, origin=bad),
        store.write("b.md", "b", expected=None, origin=ORIGIN),
        return_exceptions=True,
    )
    assert isinstance(results[1], MemoryStoreError) and results[1].code == "invalid_text"
    assert all(isinstance(result, str) for result in (results[0], results[2])), results
    fresh = LogFileStore(objects)
    assert [entry.path for entry in await fresh.list()] == ["a.md", "b.md", "seed.md"]
    assert await MemoryAdmin(fresh).verify() == []


def test_a_memory_cannot_be_opened_inside_another_ones_folders(tmp_path: Path) -> None:
    from bucket_memory.objects.urls import parse_url

    for url in ("file:///tmp/a\x00b", "s3://[", "A://["):
        with pytest.raises(MemoryStoreError) as caught:
            parse_url(url)
        assert caught.value.code == "invalid_path"
    for url in ("s3://bucket/team/log", "gs://bucket/team/checkpoints/x", "s3://bucket/log"):
        with pytest.raises(MemoryStoreError) as caught:
            parse_url(url)
        assert caught.value.code == "invalid_path" and "reserved" in str(caught.value)
    outer = tmp_path / "outer"
    asyncio.run(LogFileStore.local(outer).write("a.md", "a", expected=None, origin=ORIGIN))
    with pytest.raises(MemoryStoreError) as caught:
        LocalObjectStore(outer / "log" / "inner")
    assert caught.value.code == "invalid_path"
    LocalObjectStore(tmp_path / "log")  # a folder named log that holds no memory is fine


def test_a_local_memory_in_the_checkpoints_folder_of_one_not_yet_checkpointed_is_refused(tmp_path: Path) -> None:
    """Issue 43: a memory at P with two writes owns P/checkpoints/ before its first checkpoint; a
    memory made there was allowed, and then P's own acknowledged writes could not be opened."""
    outer = tmp_path / "outer"

    async def two_writes() -> None:
        store = LogFileStore.local(outer)
        await store.write("a.md", "a", expected=None, origin=ORIGIN)
        await store.write("b.md", "b", expected=None, origin=ORIGIN)

    asyncio.run(two_writes())
    for reserved in ("checkpoints", "log"):
        with pytest.raises(MemoryStoreError) as caught:
            LocalObjectStore(outer / reserved)
        assert caught.value.code == "invalid_path" and str(outer) in str(caught.value)
    # One made there before this check (by an older release) never makes the outer memory unreadable.
    inner = outer / "checkpoints" / "log"
    inner.mkdir(parents=True)
    (inner / "00000000000000000001.json").write_bytes(b"{}")
    assert sorted(entry.path for entry in asyncio.run(LogFileStore.local(outer).list())) == ["a.md", "b.md"]
    fresh = tmp_path / "fresh"  # a new memory whose checkpoints/ folder holds one: refused
    (fresh / "checkpoints" / "log").mkdir(parents=True)
    (fresh / "checkpoints" / "log" / "00000000000000000001.json").write_bytes(b"{}")
    with pytest.raises(MemoryStoreError) as caught:
        LocalObjectStore(fresh)
    assert "holds a memory of its own" in str(caught.value)


async def test_objects_of_a_nested_memory_are_ignored_by_the_outer_one() -> None:
    objects = MemoryObjectStore()
    outer = LogFileStore(objects)
    await outer.write("a.md", "a", expected=None, origin=ORIGIN)
    # What a memory opened at P/log would write, as seen from the memory at P.
    nested = Commit.create(1, "0" * 64, (), ORIGIN, at=objects.clock).encode()
    objects.objects["log/log/00000000000000000001.json"] = (nested, objects.clock)
    objects.objects["checkpoints/x/00000000000000000005.json"] = (b"{}", objects.clock)
    assert await outer.write("b.md", "b", expected=None, origin=ORIGIN) == "2"
    cold = LogFileStore(objects)
    assert [entry.path for entry in await cold.list()] == ["a.md", "b.md"]
    problems = {problem.key for problem in await MemoryAdmin(cold).verify()}
    assert problems == {"log/log/00000000000000000001.json", "checkpoints/x/00000000000000000005.json"}


@pytest.mark.parametrize("pattern", ["((a{100}){100}){100}", "x{100000}", "(?:(?:a{1000}){1000})", "a" * 5000])
async def test_patterns_that_would_exhaust_memory_are_refused_before_compiling(pattern: str) -> None:
    store = LogFileStore(MemoryObjectStore())
    await store.write("a.md", "aaaa\n", expected=None, origin=ORIGIN)
    with pytest.raises(MemoryStoreError) as caught:
        await store.search(pattern, regex=True, case_sensitive=True, path="", limit=10)
    assert caught.value.code == "invalid_pattern"


async def test_one_cpu_budget_covers_the_whole_regex_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line is cheap, but the search as a whole spends more CPU than its budget: it must stop.
    A literal has no budget (its matching is linear): the same lines are searched whole."""
    ticks = count()
    monkeypatch.setattr("bucket_memory.files.search._cpu_clock", lambda: float(next(ticks)) * 0.5)
    store = LogFileStore(MemoryObjectStore())
    await store.write("a.md", "x\n" * 100, expected=None, origin=ORIGIN)
    with pytest.raises(MemoryStoreError) as caught:
        await store.search("y+", regex=True, case_sensitive=True, path="", limit=10)
    assert caught.value.code == "invalid_pattern" and "CPU time" in str(caught.value)
    matches, more = await store.search("x", regex=False, case_sensitive=True, path="", limit=1000)
    assert len(matches) == 100 and not more


async def test_a_busy_machine_does_not_fail_a_regex_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's wall-clock timeout fires while the thread got no CPU: the line is matched again."""
    calls = count()

    class Starved:
        def __init__(self, compiled: Any) -> None:
            self.compiled = compiled

        def search(self, line: str, **options: object) -> object:
            if next(calls) < 3:
                raise TimeoutError("regex timed out")
            return self.compiled.search(line)

    original = regex.compile
    monkeypatch.setattr(regex, "compile", lambda *args: Starved(original(*args)))
    monkeypatch.setattr(search_module, "_cpu_clock", lambda: 0.0)  # no CPU spent: the machine was busy
    store = LogFileStore(MemoryObjectStore())
    await store.write("a.md", "needle\n", expected=None, origin=ORIGIN)
    matches, _ = await store.search("need.e", regex=True, case_sensitive=True, path="", limit=10)
    assert [match.text for match in matches] == ["needle"]


def crafted(seq: int, prev: str, changes: list[dict[str, object]], fmt: int = 1) -> bytes:
    """A commit with a valid hash, written by hand as an attacker with bucket access would."""
    body = {
        "kind": "commit",
        "format": fmt,
        "seq": seq,
        "id": "ab" * 16,
        "time": "2026-01-01T00:00:00.000Z",
        "origin": {"run_id": None, "principal_id": None, "tool_call_id": None},
        "prev": prev,
        "changes": changes,
    }
    return canonical({**body, "hash": hashlib.sha256(canonical(body)).hexdigest()})


def edit(path: str = "a.md", **fields: object) -> dict[str, object]:
    return {"op": "edit", "path": path, **fields}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    ("case", "payload"),
    [
        ("absolute path", crafted(2, "", [{"op": "write", "path": "/etc/passwd", "text": "x"}])),
        ("dot-dot path", crafted(2, "", [{"op": "write", "path": "../../escape.md", "text": "x"}])),
        ("file under a file", crafted(2, "", [{"op": "write", "path": "a.md/b.md", "text": "x"}])),
        ("huge seq", b'{"kind":"commit","seq":' + b"9" * 5000 + b"}"),
        ("deep nesting", nested(300_000)),
        ("unknown field", crafted(2, "", [{"op": "write", "path": "x.md", "text": "x", "mode": "0777"}])),
        ("edit in format 1", crafted(2, "", [edit(at=1, removed="", inserted="b", size=2)])),
        ("write in format 2", crafted(2, "", [{"op": "write", "path": "a.md", "text": "x"}], fmt=2)),
        ("edit past the end", crafted(2, "", [edit(at=2, removed="", inserted="b", size=3)], fmt=2)),
        ("edit removing other text", crafted(2, "", [edit(at=0, removed="b", inserted="c", size=1)], fmt=2)),
        ("edit of another size", crafted(2, "", [edit(at=1, removed="", inserted="b", size=3)], fmt=2)),
        ("edit of a missing file", crafted(2, "", [edit(path="b.md", at=0, removed="", inserted="b", size=1)], fmt=2)),
        ("edit at a huge offset", crafted(2, "", [edit(at=10**30, removed="", inserted="b", size=1)], fmt=2)),
        ("a salt in format 1", crafted(2, "", [{"op": "write", "path": "a.md", "text": "x", "salt": "0" * 32}])),
        ("an erasure in format 1", crafted(2, "", [{"op": "erase", "path": "a.md"}])),
        ("erased with its text", crafted(2, "", [{"op": "write", "path": "a.md", "text": "x", "erased": 1}])),
        ("erased with its salt", crafted(2, "", [{"op": "write", "path": "a.md", "salt": "0" * 32, "erased": 1}], 3)),
        ("an unsealed text in format 3", crafted(2, "", [{"op": "write", "path": "a.md", "text": "x"}], fmt=3)),
        ("a seal without an erasure", crafted(2, "", [{"op": "write", "path": "a.md", "sealed": "0" * 64}], 3)),
        ("an erased edit with a text", crafted(2, "", [edit(at=0, inserted="b", size=1, erased=1)], fmt=2)),
        ("an erasure of an escaping path", crafted(2, "", [{"op": "erase", "path": "../a.md"}], fmt=3)),
        ("format 4", crafted(2, "", [], fmt=4)),
    ],
)
async def test_crafted_objects_are_corruption_or_void_never_served(case: str, payload: bytes) -> None:
    """What does not decode stops readers at its key; what decodes and chains but does not apply to
    the memory is void, skipped by every reader alike. Neither is served, and `verify` names both."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    head_hash = (await replay(objects))[1][-1].hash
    objects.objects[log_key(2)] = (payload.replace(b'"prev":""', f'"prev":"{head_hash}"'.encode()), objects.clock)
    if b'"prev":""' in payload:  # re-sign after filling in prev
        body = json.loads(objects.objects[log_key(2)][0])
        body.pop("hash")
        objects.objects[log_key(2)] = (canonical({**body, "hash": hashlib.sha256(canonical(body)).hexdigest()}), 0)
    if case in VOID:
        reader = LogFileStore(objects)
        assert [(entry.path, (await reader.read(entry.path)).text) for entry in await reader.list()] == [("a.md", "a")]
    else:
        with pytest.raises(CorruptObjectError) as caught:
            await LogFileStore(objects).read("a.md")
        assert caught.value.key == log_key(2), case
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert [problem.key for problem in problems] == [log_key(2)], case
    assert ("void" in problems[0].message) == (case in VOID), case


# Decoded and chained, but they do not apply to the memory: no store makes them.
VOID = {
    "file under a file",
    "edit past the end",
    "edit removing other text",
    "edit of another size",
    "edit of a missing file",
}


@pytest.mark.parametrize("version", ["1" * 5000, "\u0661", "-1", "1e3", "99999999999999999999999"])
async def test_versions_and_cursors_past_any_integer_limit_are_refused_plainly(version: str) -> None:
    store = LogFileStore(MemoryObjectStore())
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    admin = MemoryAdmin(store)
    for operation in (admin.read_at("a.md", version), admin.restore("a.md", version, origin=ORIGIN)):
        with pytest.raises(MemoryStoreError) as caught:
            await operation
        assert caught.value.code == "not_found"
    assert isinstance(await store.changes(version), FullResync)
    assert isinstance(await store.changes(f"{version}~abc"), FullResync)


async def test_a_cursor_from_another_memory_is_a_full_resync() -> None:
    one, other = LogFileStore(MemoryObjectStore()), LogFileStore(MemoryObjectStore())
    for store in (one, other):
        for name in ("a.md", "b.md", "c.md"):
            await store.write(name, name, expected=None, origin=ORIGIN)
    foreign = (await other.changes(None)).cursor
    assert isinstance(await one.changes(foreign), FullResync)
    own = (await one.changes(None)).cursor
    await one.write("d.md", "d", expected=None, origin=ORIGIN)
    assert await one.changes(own) == Changes(cursor=(await one.changes(None)).cursor, paths=("d.md",))


async def test_a_write_that_landed_but_cannot_be_confirmed_is_write_unconfirmed() -> None:
    objects = MemoryObjectStore()
    faulty = FaultyObjectStore(
        objects,
        Faults(
            script=lambda operation, key, n: (
                "lose_reply" if operation == "create" else "fail_before" if operation == "get" else None
            )
        ),
    )
    store = LogFileStore(faulty)
    await store.list()
    with pytest.raises(MemoryStoreError) as caught:
        await store.write("a.md", "a", expected=None, origin=ORIGIN)
    assert caught.value.code == "write_unconfirmed"
    assert (await replay(objects))[0].files["a.md"].text == "a", "it had landed"


async def test_an_unmapped_failure_in_housekeeping_never_fails_a_landed_write() -> None:
    objects = MemoryObjectStore()
    faulty = FaultyObjectStore(
        objects,
        Faults(
            script=lambda operation, key, n: "unmapped" if (operation, key[:12]) == ("create", "checkpoints/") else None
        ),
    )
    store = LogFileStore(faulty, options=LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=2))
    versions = [await store.write(f"f{i}.md", "x", expected=None, origin=ORIGIN) for i in range(4)]
    await store.settle()
    assert versions == ["1", "2", "3", "4"]
    assert [entry.path for entry in await LogFileStore(objects).list()] == ["f0.md", "f1.md", "f2.md", "f3.md"]


async def test_unmapped_failures_on_reads_are_store_errors() -> None:
    faulty = FaultyObjectStore(MemoryObjectStore(), Faults(script=lambda operation, key, n: "unmapped"))
    with pytest.raises(MemoryStoreError) as caught:
        await LogFileStore(faulty).list()
    assert caught.value.code == "unavailable"


async def test_cancelling_the_leader_of_a_group_commit_leaves_the_others_their_results() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(FaultyObjectStore(objects, Faults(latency=0.01)))
    leader = asyncio.create_task(store.write("a.md", "a", expected=None, origin=ORIGIN))
    await asyncio.sleep(0)  # the leader starts the cold start
    follower = asyncio.create_task(store.write("b.md", "b", expected=None, origin=ORIGIN))
    await asyncio.sleep(0)
    leader.cancel()
    assert await follower in ("1", "2")
    with pytest.raises(asyncio.CancelledError):
        await leader
    await store.settle()
    assert "b.md" in (await replay(objects))[0].files


def test_the_cli_prints_stored_text_literally(tmp_path: Path) -> None:
    path = "[red]alarm[/red].md"
    store = LogFileStore.local(tmp_path / "m")
    asyncio.run(store.write(path, "[bold]text[/bold] with [link=x]markup[/link]\n", expected=None, origin=ORIGIN))
    runner = CliRunner()
    listing = runner.invoke(app, ["ls", str(tmp_path / "m")])
    assert listing.exit_code == 0 and path in listing.stdout
    shown = runner.invoke(app, ["cat", str(tmp_path / "m"), path])
    assert shown.stdout == "[bold]text[/bold] with [link=x]markup[/link]\n"
    missing = runner.invoke(app, ["cat", str(tmp_path / "m"), "[x].md"])
    assert missing.exit_code == 3 and "[x].md" in missing.stderr


async def test_an_unknown_aws_profile_is_a_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from bucket_memory import open_store

    monkeypatch.setenv("AWS_PROFILE", "no-such-profile-here")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(MemoryStoreError) as caught:
        async with open_store("s3://bucket/memory") as store:
            await store.list()
    assert caught.value.code == "forbidden" and "no-such-profile-here" in str(caught.value)


def test_the_server_clock_follows_the_date_header() -> None:
    clock = ServerClock()
    clock.note("Tue, 01 Dec 2099 00:00:00 GMT")
    assert clock.now() > 4_000_000_000
    clock.note("not a date")
    assert clock.now() > 4_000_000_000, "a garbled header changes nothing"


async def test_a_request_refused_half_way_leaves_nothing_in_its_group_commit() -> None:
    """The log applies each request's changes to a copy; one that fails midway must be undone."""
    objects = MemoryObjectStore()
    store = LogFileStore(FaultyObjectStore(objects, Faults(latency=0.001)))
    await store.write("seed.md", "seed", expected=None, origin=ORIGIN)
    admin = MemoryAdmin(store)
    # put_files writes "a.md" first, then "a.md/b.md", which the path rule refuses once "a.md" is a file.
    results = await asyncio.gather(
        store.write("first.md", "1", expected=None, origin=ORIGIN),
        admin.put_files({"a.md": "a", "a.md/b.md": "b"}, replace=False, origin=ORIGIN),
        store.write("other.md", "2", expected=None, origin=ORIGIN),
        return_exceptions=True,
    )
    assert isinstance(results[1], MemoryStoreError) and results[1].code == "invalid_path"
    assert isinstance(results[0], str) and isinstance(results[2], str)
    for reader in (store, LogFileStore(objects)):
        assert [entry.path for entry in await reader.list()] == ["first.md", "other.md", "seed.md"]


async def test_a_checkpoint_that_failed_is_written_by_the_next_commit() -> None:
    objects = MemoryObjectStore()
    faulty = FaultyObjectStore(
        objects,
        Faults(
            script=lambda operation, key, n: (
                "refuse" if (operation, key[:12], n) == ("create", "checkpoints/", 4) else None
            )
        ),
    )
    store = LogFileStore(faulty, options=LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=4))
    for index in range(5):
        await store.write(f"f{index}.md", "x", expected=None, origin=ORIGIN)
        await store.settle()
    assert [info.key for info in await objects.list("checkpoints/")] == ["checkpoints/00000000000000000005.json"]


async def test_stats_ignore_keys_the_store_does_not_own() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    objects.objects["checkpoints/"] = (b"", objects.clock)
    objects.objects["checkpoints/notes.txt"] = (b"x", objects.clock)
    stats = await MemoryAdmin(store).stats()
    assert (stats.checkpoints, stats.checkpoint, stats.commits) == (0, None, 1)


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), "5", True, None])
def test_timeouts_that_are_not_positive_seconds_are_refused_at_construction(seconds: object) -> None:
    from google.cloud import storage

    from bucket_memory.objects.gcs import GCSObjectStore
    from bucket_memory.objects.s3 import S3ObjectStore

    with pytest.raises(ValueError, match="request_timeout must be a positive number of seconds"):
        S3ObjectStore(bucket="bucket", request_timeout=seconds)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="request_timeout must be a positive number of seconds"):
        GCSObjectStore(storage.Client.create_anonymous_client(), bucket="bucket", request_timeout=seconds)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="operation_timeout must be a positive number of seconds"):
        LogOptions(operation_timeout=seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempts", [0, -3, 1.5, True])
def test_attempt_counts_below_one_are_refused(attempts: object) -> None:
    with pytest.raises(ValueError, match="request_attempts must be a whole number of at least 1"):
        LogOptions(request_attempts=attempts)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["no", 0, None, 1])
def test_store_edits_is_a_bool(value: object) -> None:
    """A truthy "no" would turn on the commit format older readers refuse."""
    with pytest.raises(ValueError, match="store_edits must be True or False"):
        LogOptions(store_edits=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("case", "files"),
    [
        ("a file under a file", [["a.md", "a", 1], ["a.md/b.md", "b", 2]]),
        ("a path twice", [["a.md", "a", 1], ["a.md", "b", 2]]),
        ("a future version", [["a.md", "a", 9]]),
        ("an escaping path", [["../a.md", "a", 1]]),
        ("a file without text, not named erased", [["a.md", None, 1], ["b.md", "b", 2]]),
    ],
)
async def test_a_crafted_checkpoint_is_never_served(case: str, files: list[list[object]]) -> None:
    """A cold start checks a checkpoint's files once for the whole, not file by file as commits
    are: every rule a commit obeys must still hold for what a checkpoint holds."""
    await check_crafted_checkpoint(case, {"files": files})


async def check_crafted_checkpoint(case: str, fields: dict[str, object]) -> None:
    """A memory of a.md and b.md whose newest checkpoint has `fields` set by hand, its hash valid:
    a cold start must never serve it (it passes it over for the log below) and `verify` names it."""
    objects, key = await checkpointed({"a.md": "a", "b.md": "b"})
    stored = json.loads(objects.objects[key][0])
    body = {name: value for name, value in stored.items() if name not in ("hash", "descriptions", "described_with")}
    body.update(fields)
    objects.objects[key] = (canonical({**body, "hash": hashlib.sha256(canonical(body)).hexdigest()}), objects.clock)
    await assert_passed_over(objects, key, {"a.md": "a", "b.md": "b"})


async def assert_passed_over(objects: MemoryObjectStore, key: str, files: dict[str, str], reason: str = "") -> None:
    """A cold start serves the log below the unusable checkpoint at `key`, and `verify` names it."""
    store = LogFileStore(objects)
    assert {entry.path: (await store.read(entry.path)).text for entry in await store.list()} == files
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert [problem.key for problem in problems] == [key] and reason in problems[0].message


async def checkpointed(files: dict[str, str], *, packed: bool = True) -> tuple[MemoryObjectStore, str]:
    """A memory of `files`, each written by a commit of its own, and the key of its newest checkpoint."""
    objects = MemoryObjectStore()
    options = LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=1, packed_checkpoints=packed)
    store = LogFileStore(objects, options=options)
    for path, text in files.items():
        await store.write(path, text, expected=None, origin=ORIGIN)
    await store.settle()
    return objects, [info.key for info in await objects.list("checkpoints/")][-1]


def _spaced(data: bytes) -> bytes:
    return json.dumps(json.loads(data), sort_keys=True, ensure_ascii=False).encode()


def _hash_first(data: bytes) -> bytes:
    body = json.loads(data)
    return b'{"hash":' + json.dumps(body.pop("hash")).encode() + b"," + canonical(body)[1:]


def _index_hash_first(data: bytes) -> bytes:
    index = data.index(b'","index":') + len(b'","index":')
    return data[:index] + _hash_first(data[index:-1]) + b"}"


_NOT_CANONICAL = "not in the canonical form the store writes"
_NOT_PACKED = "not laid out as a packed checkpoint"
_BAD_BLOCK = "block 0 of its texts does not match its digest"


@pytest.mark.parametrize(
    ("packed", "change", "reason"),
    [
        (False, lambda data: data.replace(b"the b text", b"the B text"), "its content does not match its hash"),
        (False, lambda data: data.replace(b"the b text", b"the b text, longer"), "its content does not match its hash"),
        (False, _spaced, _NOT_CANONICAL),
        (False, _hash_first, _NOT_CANONICAL),
        (True, lambda data: data.replace(b"the b text", b"the B text", 1), _BAD_BLOCK),  # not its description
        (True, lambda data: data.replace(b"the b text", b"the b text, longer"), _NOT_PACKED),
        (True, lambda data: data.replace(b'"floor":', b'"floor":1,"floor":'), _NOT_CANONICAL),
        (True, _spaced, _NOT_PACKED),
        (True, _index_hash_first, _NOT_CANONICAL),
    ],
)
async def test_a_checkpoint_changed_after_it_was_written_is_never_served(
    packed: bool, change: Callable[[bytes], bytes], reason: str
) -> None:
    """A cold open hashes a checkpoint's bytes as read rather than encoding them again (of a packed
    one, its index, and each block of texts as it reads it): a changed byte must still break the
    hash, and the same content in another form must still be refused (passed over for the log)."""
    objects, key = await checkpointed({"a.md": "the a text", "b.md": "the b text"}, packed=packed)
    changed = change(objects.objects[key][0])
    assert changed != objects.objects[key][0]
    objects.objects[key] = (changed, objects.clock)
    if reason.startswith("block"):  # found only as a text is read, once the cold start took the index
        with pytest.raises(CorruptObjectError) as caught:
            await LogFileStore(objects).read("b.md")
        assert (caught.value.key, caught.value.reason) == (key, reason)
        return
    await assert_passed_over(objects, key, {"a.md": "the a text", "b.md": "the b text"}, reason)


@pytest.mark.parametrize("path", [None, 5, b"a.md", ["a.md"], {"a": 1}])
async def test_a_path_of_another_type_is_refused_plainly(path: Any) -> None:
    """An API caller's path of the wrong type is `invalid_path`, never a TypeError from deep inside."""
    store = LogFileStore(MemoryObjectStore())
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    attempts = [
        store.read(path),
        store.write(path, "x", expected=None, origin=ORIGIN),
        store.delete(path, expected="1", origin=ORIGIN),
        store.move("a.md", path, expected="1", origin=ORIGIN),
    ]
    for attempt in attempts:
        with pytest.raises(MemoryStoreError) as caught:
            await attempt
        assert caught.value.code == "invalid_path"
    assert (await store.read("a.md")).text == "a"


@pytest.mark.parametrize(
    ("case", "fields"),
    [
        ("erased names a file with text", {"format": 2, "erased": [["b.md", 3]]}),
        ("erased without format 2", {"files": [["a.md", None, 1], ["b.md", "b", 2]], "erased": [["a.md", 3]]}),
        ("format 2 without erased", {"format": 2}),
        (
            "an erased file named twice",
            {"format": 2, "files": [["a.md", None, 1], ["b.md", "b", 2]], "erased": [["a.md", 3], ["a.md", 4]]},
        ),
    ],
)
async def test_a_crafted_checkpoint_of_erased_files_is_never_served(case: str, fields: dict[str, object]) -> None:
    await check_crafted_checkpoint(case, fields)


async def test_a_sealed_text_changed_after_sealing_is_corruption() -> None:
    """In format 3 the hash covers each text's salted digest: swapping a text or its salt for
    another, the hash left as it was, breaks the hash as it did when the hash covered texts."""
    objects = MemoryObjectStore()
    await LogFileStore(objects).write("a.md", "the real text", expected=None, origin=ORIGIN)
    stored = objects.objects[log_key(1)][0]
    for field, forged in (("text", "a forged text"), ("salt", "0" * 32)):
        body = json.loads(stored)
        body["changes"][0][field] = forged
        objects.objects[log_key(1)] = (canonical(body), objects.clock)
        with pytest.raises(CorruptObjectError) as caught:
            await LogFileStore(objects).read("a.md")
        assert caught.value.reason == "its content does not match its hash", field
