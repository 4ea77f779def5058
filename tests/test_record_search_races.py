"""Searches racing writes: concurrent searches in one process each rank the state they read (the
index is never shared mid-search), and processes that search while others add and update records
see only records that were written, never fewer than before, and never overwrite a change with a
vector they wrote back."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogRecordStore, MemoryAdmin, open_record_store
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.record_format import RecordBody
from bucket_memory.testing.faults import Faults, FaultyObjectStore

from .races import run_processes
from .record_races import search_with_model, write_or_search

# Before the fix, every run failed with these (an IndexError from another search's index, or its records).
ROUNDS, SEEDED = 100, 200


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond (5 ms by default), so that racing worker threads interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("switching_often")
async def test_concurrent_searches_each_rank_the_state_they_read() -> None:
    objects = MemoryObjectStore()
    texts = {f"{n:032x}": f"tea fact number {n}" for n in range(SEEDED)}
    bodies = {f"{key}.json": RecordBody(text=text, updated_at=time_text(1.7e9)).encode() for key, text in texts.items()}
    await MemoryAdmin(LogFileStore(objects)).put_files(bodies, replace=False, origin=Origin())
    searcher = LogRecordStore(LogFileStore(FaultyObjectStore(objects, Faults(latency=0.001))))
    writer = LogRecordStore(LogFileStore(objects))  # another process
    seeded, added = set(texts), list[str]()

    async def search(at_least: int) -> None:
        found = await searcher.search("tea", limit=10_000)
        assert all(texts[record.id] == record.text for record in found)
        extras = {record.id for record in found} - seeded
        assert len(found) >= at_least and extras == set(added[: len(extras)])  # the records of one state

    searches = []
    for n in range(ROUNDS):
        record = await writer.add(f"tea fact extra {n}")
        texts[record.id] = record.text
        added.append(record.id)
        searches.append(asyncio.create_task(search(len(texts))))
    await asyncio.gather(*searches)


def test_processes_search_while_others_add_and_update(tmp_path: Path) -> None:
    """Two writers, a searcher by BM25 and one by vectors that writes back the vectors it makes."""
    url = str(tmp_path / "facts")
    asyncio.run(_seed(url))
    rounds = 12
    roles = [("write", "w1"), ("write", "w2"), ("search", "s1"), ("search-embedded", "s2")]
    reports = run_processes(write_or_search, [(role, url, name, rounds) for role, name in roles])
    told = [cast(tuple[str, list[Any]], report) for report in reports]
    written = [tuple(pair) for kind, pairs in told if kind == "written" for pair in pairs]
    seen = [counts for kind, counts in told if kind == "seen"]
    assert len(written) == 2 * rounds and len(seen) == 2
    for counts in seen:
        assert counts == sorted(counts), f"a later search found fewer records: {counts}"  # reads never go back
    held = asyncio.run(_held(url))
    assert len(held) == 1 + len(written)
    for record_id, text in written:
        assert held[record_id] == text  # no acknowledged change lost, none overwritten by a written-back vector


async def _seed(url: str) -> None:
    async with open_record_store(url) as store:
        await store.add("w0 noted fact 0")


async def _held(url: str) -> dict[str, str]:
    async with open_record_store(url) as store:
        return {record.id: record.text for record in (await store.list(limit=1000)).records}


def test_two_models_in_racing_processes_embed_each_record_once_and_keep_both(tmp_path: Path) -> None:
    """A model change half rolled out: two processes search in step, each with its own model, over
    200 records stored without vectors. Each embeds every record once (its first search) and
    never again: the other's write-backs keep its vectors beside theirs, where one vector a record
    made each search re-embed everything the other had just replaced."""
    url = str(tmp_path / "facts")
    seeded = asyncio.run(_seed_many(url, 200))
    rounds = 4
    reports = run_processes(search_with_model, [(url, "hashing-v1", 64, rounds), (url, "hashing-v2", 32, rounds)])
    for _, embedded in cast(list[tuple[str, list[int]]], reports):
        assert embedded[0] == 200 and embedded[1:] == [0] * (rounds - 1), embedded
    bodies, seq = asyncio.run(_bodies(url))
    assert seq - seeded == 2 * 4, "one write-back commit a batch of 50, a model"
    for body in bodies:
        assert [one.model for one in body.embeddings] in (
            ["test:hashing-v1", "test:hashing-v2"],
            ["test:hashing-v2", "test:hashing-v1"],
        )


async def _seed_many(url: str, count: int) -> int:
    async with open_record_store(url) as store:
        for n in range(count):
            await store.add(f"team {n % 7} owns release {n}")
        return (await store.files.state()).head


async def _bodies(url: str) -> tuple[list[RecordBody], int]:
    async with open_record_store(url) as store:
        state = await store.files.state()
        bodies = [RecordBody.decode(live.text) for live in state.files.values()]
        return [body for body in bodies if body is not None], state.head
