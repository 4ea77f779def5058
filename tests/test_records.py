"""The harness record memory contract on the commit log, on every backend (the `objects` fixture):
ids, last writer wins, paging with cursors, ranking by BM25 and by an embedder's vectors, and
files that are not records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from a13n_harness.providers.memory import Changes, MemoryStoreError, Origin, RecordStore
from pydantic_ai import Embedder

from bucket_memory import LogFileStore, LogRecordStore, MemoryAdmin, open_record_store
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.embeddings import HashingEmbeddingModel
from bucket_memory.testing.faults import FaultyObjectStore

from .conftest import BUCKET, VERSIONED, unique_prefix
from .test_recover import wipe

ORIGIN = Origin(principal_id="records-test")
FACTS = ["prefers green tea in the morning", "lives in Lisbon", "allergic to peanuts", "plays the cello"]


def records_on(objects: ObjectStore, embedder: Embedder | None = None) -> LogRecordStore:
    return LogRecordStore(LogFileStore(objects), embedder=embedder, origin=ORIGIN)


async def refused(code: str, operation: object) -> None:
    with pytest.raises(MemoryStoreError) as caught:
        await operation  # type: ignore[misc]
    assert caught.value.code == code, str(caught.value)


async def test_add_update_delete_purge(objects: ObjectStore) -> None:
    store = records_on(objects)
    assert isinstance(store, RecordStore)
    added = [await store.add(fact) for fact in FACTS]
    assert all(len(record.id) == 32 and record.updated_at is not None for record in added)
    other = records_on(objects)  # another process
    assert [record.text for record in (await other.list(limit=10)).records] == [
        record.text for record in sorted(added, key=lambda record: record.id)
    ]
    updated = await other.update(added[0].id, "prefers black tea now")
    assert updated.id == added[0].id and updated.text == "prefers black tea now"
    await store.delete(added[1].id)
    texts = {record.text for record in (await store.list(limit=10)).records}
    assert texts == {"prefers black tea now", FACTS[2], FACTS[3]}
    await refused("record_not_found", store.delete(added[1].id))
    await refused("record_not_found", store.update(added[1].id, "back"))
    await store.purge()
    assert (await other.list(limit=10)).records == ()


@pytest.mark.parametrize("record_id", ["", "nope", "A" * 32, "0" * 31, "../" + "0" * 29, "0" * 32 + ".json"])
async def test_ids_the_memory_does_not_hold_are_record_not_found(record_id: str) -> None:
    store = records_on(MemoryObjectStore())
    await store.add("a fact")
    await refused("record_not_found", store.update(record_id, "x"))
    await refused("record_not_found", store.delete(record_id))


@pytest.mark.parametrize("text", ["", "   \n", "x" * 8001, "a\ud800b", 5, None, b"bytes", ["a"]])
async def test_text_outside_the_rule_is_invalid_text(text: object) -> None:
    store = records_on(MemoryObjectStore())
    await refused("invalid_text", store.add(text))  # type: ignore[arg-type]
    record = await store.add("kept")
    await refused("invalid_text", store.update(record.id, text))  # type: ignore[arg-type]
    for query in (text,) if not isinstance(text, str) or "\ud800" in text else ():
        await refused("invalid_text", store.search(query, limit=3))  # type: ignore[arg-type]
    assert [r.text for r in (await store.list(limit=5)).records] == ["kept"]


@pytest.mark.parametrize("text", ["<script>alert(1)</script>", "a\x00b\x1b[31m", '{"text": "nested"}', "🍵" * 2000])
async def test_markup_and_control_characters_are_kept_literally(text: str) -> None:
    store = records_on(MemoryObjectStore())
    record = await store.add(text)
    assert [(r.id, r.text) for r in (await records_on(store.files.objects).list(limit=5)).records] == [
        (record.id, text)
    ]


async def test_pages_cover_every_record_once_and_cursors_name_their_memory() -> None:
    objects = MemoryObjectStore()
    store = records_on(objects)
    ids = sorted([(await store.add(f"fact number {n}")).id for n in range(25)])
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = await store.list(limit=10, cursor=cursor)
        seen += [record.id for record in page.records]
        if (cursor := page.next_cursor) is None:
            break
    assert seen == ids
    page = await store.list(limit=10)
    elsewhere = records_on(MemoryObjectStore())
    await elsewhere.add("another memory")
    foreign: list[object] = [page.next_cursor, "garbage", "after:" + "0" * 32, 5]
    for other in foreign:
        await refused("invalid_cursor", elsewhere.list(limit=10, cursor=other))  # type: ignore[arg-type]


async def test_a_write_is_one_create_and_a_search_one_get() -> None:
    counted = FaultyObjectStore(MemoryObjectStore())
    store = records_on(counted)
    first = await store.add("prefers green tea")
    counted.calls.clear()
    await store.add("lives in Lisbon")
    await store.update(first.id, "prefers black tea")
    assert dict(counted.calls) == {"create": 2}
    counted.calls.clear()
    found = await store.search("tea", limit=3)
    assert [record.text for record in found] == ["prefers black tea"]
    assert dict(counted.calls) == {"get": 1}


async def test_lexical_search_ranks_by_bm25(objects: ObjectStore) -> None:
    store = records_on(objects)
    for fact in FACTS:
        await store.add(fact)
    found = await store.search("What tea do they drink in the morning?", limit=2)
    assert [record.text for record in found] == [FACTS[0]]
    assert found[0].score is not None and found[0].score > 0
    assert await store.search("submarine", limit=5) == ()
    assert await store.search("tea", limit=0) == ()


async def test_search_by_meaning_uses_the_stored_vectors() -> None:
    objects = MemoryObjectStore()
    model = HashingEmbeddingModel()
    store = records_on(objects, Embedder(model))
    for fact in FACTS:
        await store.add(fact)
    assert model.embedded == FACTS
    stored = [json.loads(live.text) for live in (await store.files.state()).files.values()]
    assert {body["embedding"]["model"] for body in stored} == {"test:hashing-v1"}
    reader_model = HashingEmbeddingModel()
    reader = records_on(objects, Embedder(reader_model))
    found = await reader.search("green tea", limit=2)
    assert found[0].text == FACTS[0] and (found[0].score or 0) > (found[1].score or 0)
    assert reader_model.embedded == ["green tea"]  # the query only: every record carried its vector


async def test_another_embedding_model_never_compares_vectors_across_spaces() -> None:
    objects = MemoryObjectStore()
    await_store = records_on(objects, Embedder(HashingEmbeddingModel("hashing-v1")))
    for fact in FACTS:
        await await_store.add(fact)
    newer = HashingEmbeddingModel("hashing-v2")
    store = records_on(objects, Embedder(newer))
    found = await store.search("peanuts", limit=1)
    assert [record.text for record in found] == [FACTS[2]]
    assert sorted(newer.embedded) == sorted(["peanuts", *FACTS])  # the records, once, in the new space
    newer.embedded.clear()
    await store.search("cello", limit=1)
    assert newer.embedded == ["cello"]


async def test_files_that_are_not_records_are_skipped(objects: ObjectStore) -> None:
    """Written through the file tools or by hand: never served as records, never fatal."""
    store = records_on(objects)
    kept = await store.add("a real record")
    files = store.files
    await files.write("notes.md", "not a record\n", expected=None, origin=ORIGIN)
    await files.write("0" * 32 + ".json", '{"text": "no time"}', expected=None, origin=ORIGIN)
    vector = {"model": "test:x", "vector": "!!!"}
    bad = json.dumps({"embedding": vector, "text": "bad vector", "updated_at": "2026-01-01T00:00:00.000Z"})
    await files.write("1" * 32 + ".json", bad, expected=None, origin=ORIGIN)
    assert [record.id for record in (await store.list(limit=10)).records] == [kept.id]
    assert [record.id for record in await store.search("record", limit=10)] == [kept.id]
    await refused("record_not_found", store.update("0" * 32, "x"))


async def test_record_changes_have_history_like_files() -> None:
    store = records_on(MemoryObjectStore())
    record = await store.add("first text")
    await store.update(record.id, "second text")
    revisions = await MemoryAdmin(store.files).revisions(f"{record.id}.json")
    assert [revision.action for revision in revisions] == ["write", "write"]
    assert revisions[0].origin.principal_id == "records-test"
    old = await MemoryAdmin(store.files).read_at(f"{record.id}.json", revisions[1].version)
    assert json.loads(old.text)["text"] == "first text"


@pytest.mark.parametrize("backend", ["local", "s3", "gcs"])
async def test_a_record_memory_on_each_backend_by_name(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """`LogRecordStore.local`, `.s3` and `.gcs`, as `LogFileStore` has them."""
    match backend:
        case "local":
            store = LogRecordStore.local(tmp_path / "facts")
        case "s3":
            request.getfixturevalue("s3_endpoint")
            store = LogRecordStore.s3(bucket=BUCKET, prefix=unique_prefix())
        case _:
            store = LogRecordStore.gcs(request.getfixturevalue("gcs_client"), bucket=BUCKET, prefix=unique_prefix())
    added = await store.add("kept in a bucket")
    assert [record.id for record in await store.search("bucket", limit=1)] == [added.id]
    await store.files.settle()
    if backend == "s3":
        await store.files.objects.aclose()  # type: ignore[attr-defined]


async def test_a_deleted_record_is_restored_and_a_wiped_record_memory_recovered(s3_endpoint: str) -> None:
    """Records are files of the log: `restore` and `recover` work on them unchanged."""
    url = f"s3://{VERSIONED}/{unique_prefix()}"
    async with open_record_store(url) as store:
        kept = await store.add("prefers green tea")
        gone = await store.add("lives in Lisbon")
        await store.delete(gone.id)
        admin = MemoryAdmin(store.files)
        written = (await admin.revisions(f"{gone.id}.json"))[-1].version
        await admin.restore(f"{gone.id}.json", written, origin=ORIGIN)
        assert {record.id for record in (await store.list(limit=10)).records} == {kept.id, gone.id}
    wipe(url)
    async with open_record_store(url) as store:
        await refused("memory_deleted", store.list(limit=10))
        await MemoryAdmin(store.files).recover(None, origin=ORIGIN)
        assert {record.text for record in (await store.list(limit=10)).records} == {
            "prefers green tea",
            "lives in Lisbon",
        }


async def test_purge_deletes_the_records_only_in_one_commit(objects: ObjectStore) -> None:
    """The harness's "remove every record": files under the prefix that are not records stay."""
    counted = FaultyObjectStore(objects)
    store = records_on(counted)
    for fact in FACTS:
        await store.add(fact)
    files = store.files
    kept = {"notes.md": "not a record\n", "0" * 32 + ".json": '{"text": "no time"}', "1" * 31 + ".json": "{}"}
    for path, text in kept.items():
        await files.write(path, text, expected=None, origin=ORIGIN)
    cursor = (await files.changes(None)).cursor
    counted.calls.clear()
    await store.purge()
    assert counted.calls["create"] == 1
    assert (await store.list(limit=10)).records == ()
    assert {entry.path: (await files.read(entry.path)).text for entry in await files.list()} == kept
    changed = await files.changes(cursor)
    assert isinstance(changed, Changes) and len(changed.paths) == len(FACTS)  # cursors still work: no full resync
    counted.calls.clear()
    await store.purge()  # nothing left to delete: no commit
    assert counted.calls["create"] == 0
    assert [record.text for record in await store.search("tea", limit=3)] == []
    await store.add("green tea again")
    assert [record.text for record in await store.search("tea", limit=3)] == ["green tea again"]
