"""`verify --all`, `stats --all`, `compact --all`: every memory under a prefix in one process, a few at a time, each
reported on its own (one that cannot be read among them)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.cli import app
from bucket_memory.cli.provisioning import doctor_checks
from bucket_memory.connect import memory_prefixes
from bucket_memory.fanout import each_memory, each_of
from bucket_memory.testing.faults import FaultyObjectStore
from bucket_memory.testing.prefixed import PrefixedObjectStore
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .conftest import VERSIONED, unique_prefix
from .helpers import CliRunner, cli
from .test_cli_signals import proxied

ORIGIN = Origin(run_id="fanout-test")
SCHEMAS = Path(__file__).parent.parent / "docs" / "cli" / "schemas"
WORK_NAMES = ["verify", "stats", "compact", "doctor"]


async def _write(url: str, files: int) -> None:
    async with open_store(url) as store:
        for n in range(files):
            await store.write(f"n{n}.md", f"note {n}\n", expected=None, origin=ORIGIN)


async def test_every_memory_once_at_most_concurrency_at_a_time(tmp_path: Path) -> None:
    users = tmp_path / "users"
    for n in range(5):
        await _write(str(users / f"u{n}"), n + 1)
    in_flight, most, seen = 0, 0, []

    async def work(admin: MemoryAdmin) -> int:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        for _ in range(3):  # yield, so that a store opened beside it could start its work
            await asyncio.sleep(0)
        stats = await admin.stats()
        in_flight -= 1
        return stats.files

    outcomes = await each_memory(users, work, concurrency=2, progress=lambda done, total: seen.append((done, total)))

    assert [(Path(outcome.url).name, outcome.result) for outcome in outcomes] == [(f"u{n}", n + 1) for n in range(5)]
    assert most == 2
    assert seen[0] == (0, 5) and seen[-1] == (5, 5) and len(seen) == 6


def _json(*arguments: str, expect: int) -> object:
    result = CliRunner().invoke(app, [*arguments, "--json"])
    assert result.exit_code == expect, result.output
    value = json.loads(result.stdout)
    jsonschema.validate(value, json.loads((SCHEMAS / f"{arguments[0]}.json").read_text()))
    return value


def boto3_client() -> Any:
    import botocore.session

    return botocore.session.get_session().create_client("s3")


@pytest.mark.slow  # 10 s: test_every_all_command_on_local_memories_... keeps its exit codes in make test
def test_every_all_command_on_s3_reports_a_damaged_destroyed_or_refused_memory_and_does_the_rest(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a and e are whole; b destroyed, c damaged, d refused (403) by the bucket: each command does a
    and e, says what is wrong with the others, and exits 1 (stats --all said 0 with two memories unread)."""
    place = f"{unique_prefix()}/users"
    root = f"s3://{VERSIONED}/{place}"
    for name, files in (("a", 1), ("b", 2), ("c", 3), ("d", 1), ("e", 2)):
        asyncio.run(_write(f"{root}/{name}", files))
    cli("destroy", f"{root}/b", "--yes")
    boto3_client().put_object(Bucket=VERSIONED, Key=f"{place}/c/log/00000000000000000002.json", Body=b'{"not": 1}')

    def refuse_d(number: int, method: str, path: str) -> int | None:
        return 403 if f"{place}/d/" in unquote(path) else None

    with proxied(s3_endpoint, refuse_d) as proxy_url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy_url)
        said = {
            command: _json(command, root, "--all", expect=1) for command in ("verify", "stats", "compact", "doctor")
        }
        human = cli("verify", root, "--all", expect=1)
    by_url = {command: {item["url"].rsplit("/", 1)[1]: item for item in found} for command, found in said.items()}  # type: ignore[attr-defined]
    for command, memories in by_url.items():
        assert sorted(memories) == list("abcde"), command
        assert (memories["b"]["destroyed"], memories["b"]["error"]["code"]) == (True, "memory_deleted"), command
        assert memories["d"]["error"]["code"] == "forbidden", command
        for name in "ace":
            assert not memories[name]["destroyed"], command
    assert [by_url["verify"][name]["ok"] for name in "abcde"] == [True, True, False, False, True]
    assert by_url["verify"]["c"]["problems"]
    assert [by_url["stats"][name]["stats"] and by_url["stats"][name]["stats"]["files"] for name in "ae"] == [1, 2]
    assert by_url["stats"]["c"]["error"]
    assert by_url["compact"]["a"]["compacted"] == {"floor": 0, "log_deleted": 0, "checkpoints_deleted": 0}
    assert by_url["compact"]["c"]["error"] and by_url["compact"]["e"]["compacted"]
    assert [by_url["doctor"][name]["ok"] for name in "abcde"] == [True, False, False, False, True]
    assert by_url["doctor"]["a"]["checked"] == {"create_only": True, "versioning": "enabled"}
    assert (
        f"{root}/a: ok" in human and f"{root}/b: destroyed" in human and "2 of 4 memories whole, 1 destroyed" in human
    )


@pytest.mark.parametrize("command", WORK_NAMES)
def test_every_all_command_on_local_memories_reports_a_damaged_or_destroyed_one_and_does_the_rest(
    command: str, tmp_path: Path
) -> None:
    for name, files in (("a", 1), ("b", 2), ("c", 3), ("d", 1)):
        asyncio.run(_write(str(tmp_path / name), files))
    cli("destroy", str(tmp_path / "b"), "--yes")
    (tmp_path / "c" / "log" / "00000000000000000002.json").write_bytes(b'{"not": 1}')
    found = _json(command, str(tmp_path), "--all", expect=1)  # stats --all said 0
    assert isinstance(found, list)
    by_name = {Path(item["url"]).name: item for item in found}
    assert sorted(by_name) == list("abcd")
    assert by_name["b"]["destroyed"] and by_name["b"]["error"]["code"] == "memory_deleted"
    assert by_name["c"]["error"] or by_name["c"]["problems"]
    assert by_name["a"]["error"] is None and by_name["d"]["error"] is None


# Memories of different histories: one commit, a few, past a checkpoint (which compaction can use).
HISTORIES = {"users/a": 1, "users/b": 3, "users/c": 40, "users/c/child": 2}
AGED = LogOptions(grace_period=0.0, retain_commits=1, retain_seconds=0.0)
WORK: dict[str, Callable[[MemoryAdmin], Awaitable[object]]] = {
    "verify": lambda admin: admin.verify(),
    "stats": lambda admin: admin.stats(),
    "compact": lambda admin: admin.compact(),
    "doctor": doctor_checks,
}


async def _bucket() -> VersionedMemoryObjectStore:
    bucket = VersionedMemoryObjectStore()
    for prefix, commits in HISTORIES.items():
        async with LogFileStore(PrefixedObjectStore(bucket, prefix + "/"), options=AGED) as store:
            for n in range(commits):
                await store.write(f"n{n}.md", f"note {n}\n", expected=None, origin=ORIGIN)
    bucket.clock += 86_400  # every checkpoint past the grace period and the retention
    return bucket


@pytest.mark.parametrize("command", WORK)
async def test_requests_are_the_per_memory_sums_plus_one_listing(command: str) -> None:
    """Each --all command in one process costs what running it on each memory alone does, plus one
    listing to find them (the issue's goal allows twice the sum)."""
    alone = 0
    for prefix in HISTORIES:
        counted = FaultyObjectStore(await _bucket())
        async with LogFileStore(PrefixedObjectStore(counted, prefix + "/"), options=AGED) as store:
            await WORK[command](MemoryAdmin(store))
        alone += counted.requests

    counted = FaultyObjectStore(await _bucket())
    found = await memory_prefixes(counted)
    assert found == sorted(HISTORIES) and counted.requests == 1

    def opened(memory: str) -> LogFileStore:
        return LogFileStore(PrefixedObjectStore(counted, memory + "/"), options=AGED)

    outcomes = await each_of(found, opened, WORK[command], concurrency=3)
    assert [outcome.error for outcome in outcomes] == [None] * len(HISTORIES)
    assert counted.requests == alone + 1
    assert alone > 4 * len(HISTORIES)  # the work was done, not skipped
    if command == "compact":
        assert [getattr(outcome.result, "floor", None) for outcome in outcomes] == [0, 0, 32, 0]


@pytest.mark.parametrize("concurrency", [0, -1, 2.5, "8", True, None])
async def test_a_concurrency_that_is_no_count_is_refused_before_any_request(concurrency: Any, tmp_path: Path) -> None:
    """0 waited forever (a semaphore nobody could take); -1 failed inside asyncio, 2.5 and "8" deep
    in the work, True ran one at a time."""

    def opened(memory: str) -> LogFileStore:
        raise AssertionError("nothing is opened")

    with pytest.raises(ValueError, match=r"concurrency must be a whole number of at least 1, not"):
        await each_memory(tmp_path / "nothing-here", WORK["stats"], concurrency=concurrency)
    with pytest.raises(ValueError, match=r"concurrency must be a whole number of at least 1, not"):
        await each_of(["x"], opened, WORK["stats"], concurrency=concurrency)


async def test_a_huge_concurrency_works_on_what_there_is(tmp_path: Path) -> None:
    for n in range(3):
        await _write(str(tmp_path / f"u{n}"), 1)
    outcomes = await each_memory(tmp_path, lambda admin: admin.stats(), concurrency=10**18)
    assert [outcome.result.files if outcome.result else None for outcome in outcomes] == [1, 1, 1]


@pytest.mark.parametrize("command", WORK)
@pytest.mark.parametrize("concurrency", ["0", "-1", "65", str(10**30), "2.5", "eight", ""])
def test_the_cli_refuses_a_concurrency_out_of_range_as_a_usage_error(
    command: str, concurrency: str, tmp_path: Path
) -> None:
    said = cli(command, str(tmp_path), "--all", "--concurrency", concurrency, expect=2)
    assert "--concurrency" in said


class _Refused(PrefixedObjectStore):
    """A memory the caller's grants do not reach: the bucket refuses every request under it."""

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> Any:
        raise MemoryStoreError("forbidden", f"{self.location}: access denied")

    async def get(self, key: str) -> bytes | None:
        raise MemoryStoreError("forbidden", f"{self.location}: access denied")


@pytest.mark.parametrize("command", WORK_NAMES)
async def test_a_memory_in_the_middle_that_refuses_access_is_reported_and_the_others_done(command: str) -> None:
    counted = FaultyObjectStore(await _bucket())
    found = await memory_prefixes(counted)

    def opened(memory: str) -> LogFileStore:
        view = _Refused if memory == "users/b" else PrefixedObjectStore
        return LogFileStore(view(counted, memory + "/"), options=AGED)

    outcomes = await each_of(found, opened, WORK[command], concurrency=2)
    assert [outcome.error.code if outcome.error else None for outcome in outcomes] == [None, "forbidden", None, None]
    assert all(outcome.result is not None or command == "doctor" for n, outcome in enumerate(outcomes) if n != 1)
