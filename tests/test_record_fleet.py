"""Record writers in a fleet commit as file writers do: a write that meets others goes on as an
intent that whoever commits next folds, and the last writer still wins.

What a broken implementation would get wrong: record writes that race one serial log past the
fleet (no intent, ever), an update or delete that a fold applies over a version it never checked
(a deleted record brought back), or one refused because another process changed the record first.
"""

from __future__ import annotations

import asyncio

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogRecordStore
from bucket_memory.format.wire_values import PENDING_PREFIX
from bucket_memory.objects.memory import MemoryObjectStore

from .helpers import replay
from .test_fleet import contend

ORIGIN = Origin(run_id="record-fleet")


def writers(objects: MemoryObjectStore, count: int) -> list[LogRecordStore]:
    return [LogRecordStore(LogFileStore(objects), origin=ORIGIN) for _ in range(count)]


async def test_a_record_write_that_lost_its_race_is_folded_from_an_intent() -> None:
    objects = MemoryObjectStore()
    mine, other = writers(objects, 2)
    await mine.list(limit=1)
    await other.add("theirs")
    record = await mine.add("mine")  # loses at 1, then an intent
    _, commits = await replay(objects)
    assert len(commits) == 2
    (fold,) = commits[1].folded or ()
    assert fold.outcome == "applied" and fold.base == 1
    assert (await other.full_id(record.id)) == record.id


async def test_a_fleet_of_record_writers_commits_through_intents() -> None:
    counted = MemoryObjectStore()
    fleet = [LogRecordStore(LogFileStore(counted), origin=ORIGIN) for _ in range(4)]
    seed = await fleet[0].add("seed")
    for writer in fleet:
        await writer.list(limit=1)
        contend(writer.files)
    added = await asyncio.gather(*(writer.add(f"fact {number}") for number, writer in enumerate(fleet)))
    await asyncio.gather(*(writer.update(seed.id, f"seed by {number}") for number, writer in enumerate(fleet)))
    _, commits = await replay(counted)
    folds = [fold for commit in commits for fold in commit.folded or ()]
    assert len([fold for fold in folds if fold.outcome == "applied"]) >= 4, "contended writers publish intents"
    listed = {record.id: record.text for record in (await fleet[0].list(limit=10)).records}
    assert {record.id for record in added} | {seed.id} == set(listed)
    assert listed[seed.id] in {f"seed by {number}" for number in range(4)}  # one of them, last
    for writer in fleet:
        await writer.files.settle()
    assert [info.key for info in await counted.list(PENDING_PREFIX)] == []


async def test_an_update_over_a_record_another_process_changed_wins_and_one_it_deleted_is_refused() -> None:
    objects = MemoryObjectStore()
    mine, other = writers(objects, 2)
    first, second = await mine.add("one"), await mine.add("two")
    await other.update(first.id, "one, theirs")
    await other.delete(second.id)
    contend(mine.files)
    # Planned on the head it holds, which still has version 1 of each: a last writer's update goes
    # on over theirs, and the deleted record is not written back.
    assert (await mine.update(first.id, "one, mine")).text == "one, mine"
    with pytest.raises(MemoryStoreError) as caught:
        await mine.update(second.id, "two, mine")
    assert caught.value.code == "record_not_found"
    with pytest.raises(MemoryStoreError) as caught:
        await mine.delete(second.id)
    assert caught.value.code == "record_not_found"
    texts = {record.text for record in (await other.list(limit=10)).records}
    assert texts == {"one, mine"}
