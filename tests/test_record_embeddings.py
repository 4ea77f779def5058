"""An embedder is a third party: its calls are bounded by the operation's deadline, made in batches,
its failures and odd answers mapped to `unavailable`, and what it made before failing is kept in the
records. Any vector size or model name a provider uses fits, or is refused at `add` with a message."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin
from pydantic_ai import Embedder
from pydantic_ai.embeddings import EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.exceptions import ModelHTTPError

from bucket_memory import LogFileStore, LogOptions, LogRecordStore, MemoryAdmin
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.record_format import Embedding, RecordBody
from bucket_memory.testing.embeddings import HashingEmbeddingModel

ORIGIN = Origin(principal_id="embeddings-test")
SHORT = LogOptions(operation_timeout=0.5)


class ScriptedModel(HashingEmbeddingModel):
    """The offline model with a provider's habits: a limit on inputs per call, a failure on a given
    call, a call that never answers, or an answer `reply` makes of the texts."""

    def __init__(
        self,
        name: str = "hashing-v1",
        dimensions: int = 64,
        *,
        limit: int | None = None,
        fail_on_call: int | None = None,
        reply: Callable[[list[str]], Any] | None = None,
    ) -> None:
        super().__init__(name, dimensions)
        self.limit, self.fail_on_call, self.reply = limit, fail_on_call, reply
        self.calls: list[int] = []  # texts per call
        self.during: Callable[[], Any] | None = None  # awaited inside the next document call

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        self.calls.append(len(texts))
        if self.limit is not None and len(texts) > self.limit:
            raise RuntimeError(f"400 Bad Request: at most {self.limit} inputs per request, got {len(texts)}")
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise ModelHTTPError(503, self._name, body="Service Unavailable: <b>overloaded</b>")
        if self.during is not None and input_type == "document":
            during, self.during = self.during, None
            await during()
        if self.reply is not None:
            return EmbeddingResult(
                embeddings=self.reply(texts),
                inputs=texts,
                input_type=input_type,
                model_name=self._name,
                provider_name="test",
            )
        return await super().embed(texts, input_type=input_type, settings=settings)


class Hanging(HashingEmbeddingModel):
    """A provider that never answers; with `stubborn`, one that also ignores being cancelled."""

    def __init__(self, *, stubborn: bool = False) -> None:
        super().__init__()
        self.stubborn = stubborn
        self.release = asyncio.Event()  # set by the test once it is done, so no task outlives it

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        while True:
            try:
                await self.release.wait()
                return await super().embed(inputs, input_type=input_type, settings=settings)
            except asyncio.CancelledError:
                if not self.stubborn:
                    raise


def store_on(
    objects: ObjectStore, model: Any = None, *, options: LogOptions | None = None, **settings: Any
) -> LogRecordStore:
    files = LogFileStore(objects, options=options, max_bytes=settings.pop("max_bytes", 32 * 1024 * 1024))
    return LogRecordStore(files, embedder=Embedder(model) if model is not None else None, origin=ORIGIN, **settings)


async def seeded(objects: ObjectStore, texts: Sequence[str]) -> list[str]:
    """Records written in one commit without vectors, as a memory written with no embedder is; their ids."""
    ids = [f"{n:032x}" for n in range(len(texts))]
    bodies = {
        f"{record_id}.json": RecordBody(text=text, updated_at=time_text(1.7e9)).encode()
        for record_id, text in zip(ids, texts, strict=True)
    }
    await MemoryAdmin(LogFileStore(objects)).put_files(bodies, replace=False, origin=ORIGIN)
    return ids


async def stored_models(objects: ObjectStore) -> dict[str, str | None]:
    state = await LogFileStore(objects).state()
    return {
        path.removesuffix(".json"): (json.loads(live.text).get("embedding") or {}).get("model")
        for path, live in state.files.items()
    }


async def refused(code: str, operation: object, *words: str) -> str:
    with pytest.raises(MemoryStoreError) as caught:
        async with asyncio.timeout(30):  # a guard against a hang, not a measure of speed
            await operation  # type: ignore[misc]
    assert caught.value.code == code, str(caught.value)
    for word in words:
        assert word in str(caught.value), str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize("stubborn", [False, True], ids=["hangs", "hangs-and-ignores-cancel"])
async def test_an_embedder_that_never_answers_ends_unavailable_at_the_deadline(stubborn: bool) -> None:
    """A write needs its vector: `unavailable`. A hybrid search answers by words, with a notice."""
    objects = MemoryObjectStore()
    (found,) = await seeded(objects, ["green tea at standup"])
    model = Hanging(stubborn=stubborn)
    store = store_on(objects, model, options=SHORT)
    try:
        await refused("unavailable", store.add("a new fact"), "operation_timeout", "hashing-v1")
        await refused("unavailable", store_on(objects, model, options=SHORT, ranking="vectors").search("tea", limit=3))
        recalled = await store.search("tea", limit=3)
        assert [record.id for record in recalled] == [found]
        assert recalled.notice is not None and recalled.notice.query and "operation_timeout" in recalled.notice.reason
        assert (await store.list(limit=5)).records[0].text == "green tea at standup"  # nothing was written
        assert len((await store.list(limit=5)).records) == 1
    finally:
        model.release.set()
        model.stubborn = False


async def test_a_provider_error_is_unavailable_naming_it() -> None:
    store = store_on(MemoryObjectStore(), ScriptedModel(fail_on_call=1))
    message = await refused("unavailable", store.add("a fact"), "ModelHTTPError", "503", "test:hashing-v1")
    assert "<b>overloaded</b>" in message  # the provider's words, kept literally (the CLI prints them as text)
    assert (await store.list(limit=5)).records == ()


@pytest.mark.parametrize(
    "reply",
    [
        lambda texts: [],  # fewer vectors than texts
        lambda texts: [[1.0, 2.0]] * (len(texts) + 1),  # more
        lambda texts: [[]] * len(texts),  # empty vectors
        lambda texts: [[1.0, float("nan")]] * len(texts),
        lambda texts: [[float("inf"), 1.0]] * len(texts),
        lambda texts: [[10**400, 1.0]] * len(texts),
        lambda texts: [["one", "two"]] * len(texts),
        lambda texts: [None] * len(texts),
        lambda texts: [[[1.0], [2.0]]] * len(texts),  # a matrix per text
        lambda texts: "not a list",
        lambda texts: None,
    ],
    ids=["fewer", "more", "empty", "nan", "inf", "overflow", "strings", "none", "nested", "text", "null"],
)
async def test_an_answer_that_is_not_one_finite_vector_per_text_is_unavailable(
    reply: Callable[[list[str]], Any],
) -> None:
    objects = MemoryObjectStore()
    await seeded(objects, ["green tea at standup", "deploys on tuesdays"])
    store = store_on(objects, ScriptedModel(reply=reply))
    await refused("unavailable", store.add("a fact"), "answered with")
    await refused(
        "unavailable", store_on(objects, ScriptedModel(reply=reply), ranking="vectors").search("tea", limit=3)
    )
    recalled = await store.search("tea", limit=3)  # hybrid: by words, saying why
    assert [record.text for record in recalled] == ["green tea at standup"]
    assert recalled.notice is not None and "answered with" in recalled.notice.reason
    assert len((await store.list(limit=5)).records) == 2


async def test_vectors_of_different_lengths_in_one_answer_are_not_kept_and_the_search_answers() -> None:
    objects = MemoryObjectStore()
    await seeded(objects, ["green tea at standup", "deploys on tuesdays"])
    ragged = ScriptedModel(reply=lambda texts: [[1.0, 2.0], [1.0, 2.0, 3.0]][: len(texts)])
    recalled = await store_on(objects, ragged).search("tea", limit=3)
    assert [record.text for record in recalled] == ["green tea at standup"]
    assert recalled.notice is not None and not recalled.notice.query and recalled.notice.records == 2
    assert "answered with" in recalled.notice.reason
    assert set((await stored_models(objects)).values()) == {None}, "nothing marked: the call failed, not the texts"


async def test_a_zero_vector_is_stored_and_similar_to_nothing() -> None:
    zeros = ScriptedModel(reply=lambda texts: [[0.0, 0.0, 0.0]] * len(texts))
    objects = MemoryObjectStore()
    record = await store_on(objects, zeros).add("a fact")
    await refused("unavailable", store_on(objects, zeros, ranking="vectors").search("fact", limit=3), "zero vector")
    recalled = await store_on(objects, zeros).search("fact", limit=3)
    assert [found.id for found in recalled] == [record.id] and recalled.notice is not None


@pytest.mark.parametrize("dimensions", [1, 3, 384, 1536, 3072, 6145, 8192])
async def test_any_dimension_a_provider_uses_is_stored_and_searched(dimensions: int) -> None:
    objects = MemoryObjectStore()
    store = store_on(objects, ScriptedModel(dimensions=dimensions))
    long_text = "green tea " + "x" * 7990  # the longest record, with the largest vector
    kept = [await store.add(text) for text in ("deploys happen on tuesdays", long_text)]
    reader = ScriptedModel(dimensions=dimensions)
    found = await store_on(objects, reader).search("green tea", limit=2)
    assert {record.id for record in found} == {record.id for record in kept}
    if dimensions >= 64:  # fewer cannot tell the texts apart
        assert found[0].id == kept[1].id
    assert reader.calls == [1]  # the query only: both vectors were stored and read back


async def test_a_vector_too_large_for_a_file_is_refused_at_add_with_a_message() -> None:
    store = store_on(MemoryObjectStore(), ScriptedModel(dimensions=40_000))
    await refused("invalid_text", store.add("a fact"), "bytes", "65536", "fewer dimensions", "test:hashing-v1")
    assert (await store.list(limit=5)).records == ()


@pytest.mark.parametrize(
    "name",
    ["m", "x" * 201, "y" * 5000, "<script>alert(1)</script>", "模型/嵌入:v2", 'a"b\\c\nd\x00e', "🍵" * 300],
    ids=["one-char", "201-chars", "5000-chars", "markup", "cjk", "escapes", "emoji"],
)
async def test_any_model_name_is_stored_and_searched(name: str) -> None:
    objects = MemoryObjectStore()
    store = store_on(objects, ScriptedModel(name))
    kept = await store.add("green tea at standup")
    await store.add("deploys happen on tuesdays")
    assert set((await stored_models(objects)).values()) == {f"test:{name}"}
    reader = ScriptedModel(name)
    assert [record.id for record in await store_on(objects, reader).search("tea", limit=1)] == [kept.id]
    assert reader.calls == [1]


async def test_a_model_name_too_long_for_a_file_is_refused_at_add() -> None:
    store = store_on(MemoryObjectStore(), ScriptedModel("m" * 70_000))
    await refused("invalid_text", store.add("a fact"), "bytes", "65536")


@pytest.mark.parametrize("batch", [0, -1, True, 1.5, "96", None, 2**70 * 0.5])
def test_a_batch_size_that_is_not_a_positive_whole_number_is_refused(batch: object) -> None:
    with pytest.raises(ValueError, match="embed_batch"):
        store_on(MemoryObjectStore(), ScriptedModel(), embed_batch=batch)


@pytest.mark.parametrize(("batch", "calls"), [(1, [1] * 7), (3, [3, 3, 1]), (7, [7]), (10**12, [7])])
async def test_records_without_a_vector_are_embedded_in_batches(batch: int, calls: list[int]) -> None:
    objects = MemoryObjectStore()
    await seeded(objects, [f"fact number {n} about tea" for n in range(7)])
    model = ScriptedModel()
    found = await store_on(objects, model, embed_batch=batch).search("tea", limit=3)
    assert len(found) == 3
    assert model.calls == [1, *calls]  # the query, then the records


async def test_a_model_change_on_a_memory_larger_than_a_providers_limit_is_searched() -> None:
    """The case that took search down: 3,001 records, a provider that takes 2,048 inputs a call."""
    objects = MemoryObjectStore()
    ids = await seeded(objects, [f"fact {n} about deploys" for n in range(3000)] + ["the team drinks green tea"])
    model = ScriptedModel(limit=2048)
    found = await store_on(objects, model).search("green tea", limit=1)
    assert [record.id for record in found] == [ids[-1]]
    assert max(model.calls) == 96 and sum(model.calls) == 3001 + 1
    assert set((await stored_models(objects)).values()) == {"test:hashing-v1"}  # all written back
    again = ScriptedModel(limit=2048)
    await store_on(objects, again).search("deploys", limit=1)  # another process pays for nothing
    assert again.calls == [1]


async def test_an_embedder_failing_part_way_keeps_what_it_made() -> None:
    objects = MemoryObjectStore()
    ids = await seeded(objects, [f"fact {n} about deploys" for n in range(10)])
    failing = ScriptedModel(fail_on_call=4)  # the query, two batches of 4, then a failure
    failing_store = store_on(objects, failing, embed_batch=4)
    recalled = await failing_store.search("deploys", limit=3)
    assert len(recalled) == 3 and recalled.notice is not None and recalled.notice.records == 2
    assert "503" in recalled.notice.reason and "8 of the 10" in recalled.notice.reason
    calls = len(failing.calls)
    assert len(await failing_store.search("deploys", limit=3)) == 3
    assert len(failing.calls) == calls + 1, "a failed call is not repeated at the next search: only its query"
    models = await stored_models(objects)
    assert [models[record_id] for record_id in ids] == ["test:hashing-v1"] * 8 + [None] * 2
    working = ScriptedModel()
    assert len(await store_on(objects, working, embed_batch=4).search("deploys", limit=3)) == 3
    assert working.calls == [1, 2]  # another process embeds only what was left


async def test_a_write_back_never_overwrites_a_record_changed_meanwhile() -> None:
    objects = MemoryObjectStore()
    ids = await seeded(objects, ["green tea at standup", "deploys on tuesdays"])
    model = ScriptedModel()
    searcher = store_on(objects, model)
    other = store_on(objects)  # another process, with no embedder

    async def change_one() -> None:
        await other.update(ids[0], "black coffee at standup")

    model.during = change_one
    await searcher.search("standup", limit=2)
    held = {record.id: record.text for record in (await other.list(limit=5)).records}
    assert held == {ids[0]: "black coffee at standup", ids[1]: "deploys on tuesdays"}
    models = await stored_models(objects)
    assert models == {ids[0]: None, ids[1]: "test:hashing-v1"}  # the changed one was left as it was


async def test_a_read_only_store_searches_by_meaning_without_writing() -> None:
    objects = MemoryObjectStore()
    ids = await seeded(objects, ["green tea at standup", "deploys on tuesdays"])
    model = ScriptedModel()
    files = LogFileStore(objects, read_only=True)
    store = LogRecordStore(files, embedder=Embedder(model))
    assert [record.id for record in await store.search("green tea", limit=1)] == [ids[0]]
    assert await stored_models(objects) == {ids[0]: None, ids[1]: None}
    model.calls.clear()
    await store.search("deploys", limit=1)
    assert model.calls == [1]  # the vectors made are kept in the process


async def test_a_memory_full_for_the_vectors_is_still_searched() -> None:
    objects = MemoryObjectStore()
    await seeded(objects, [f"fact {n}" for n in range(20)])
    used = (await LogFileStore(objects).state()).stored_bytes
    store = store_on(objects, ScriptedModel(dimensions=256), max_bytes=used + 2000)  # room for a few vectors
    assert len(await store.search("fact", limit=5)) == 5
    models = await stored_models(objects)
    assert 0 < sum(model is not None for model in models.values()) < 20  # those that fit were written


@pytest.mark.parametrize("texts", [["👍"], ["5"], ["x"], ["👍", "5", "x", "!!", "a"]])
async def test_records_with_no_word_bm25_counts_answer_with_no_records(texts: list[str]) -> None:
    store = store_on(MemoryObjectStore())
    for text in texts:
        await store.add(text)
    assert await store.search("👍", limit=5) == ()
    assert await store.search("tea", limit=5) == ()
    await store.add("green tea")
    assert [record.text for record in await store.search("tea", limit=5)] == ["green tea"]


@pytest.mark.parametrize(
    "query", ["x" * 1_000_000, "<script>alert(1)</script> tea", "tea\x00\x1b[31m", "🍵 tea " * 10_000, "   "]
)
@pytest.mark.parametrize("embedded", [False, True], ids=["bm25", "vectors"])
async def test_hostile_queries_are_answered(query: str, embedded: bool) -> None:
    model = ScriptedModel() if embedded else None
    store = store_on(MemoryObjectStore(), model)
    await store.add("green tea at standup")
    found = await store.search(query, limit=3)
    assert all(record.text == "green tea at standup" for record in found)
    if model is not None and query.strip():
        assert model.calls[-1] == 1 and len(model.embedded[-1]) <= store.record_chars  # a query cut to a record


@pytest.mark.parametrize("embedded", [False, True], ids=["bm25", "vectors"])
async def test_a_missing_extra_names_the_install_command(embedded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_on(MemoryObjectStore(), ScriptedModel() if embedded else None)
    await store.add("green tea at standup")
    monkeypatch.setitem(sys.modules, "numpy", None)  # import then raises ModuleNotFoundError
    install = 'pip install -e ".[records]" in a checkout'  # a command that runs: no index has bucket-memory
    fresh = store_on(store.files.objects, ScriptedModel() if embedded else None)  # nothing imported yet
    await refused("unavailable", fresh.search("tea", limit=3), "numpy", install)
    await refused("unavailable", fresh.list(limit=3), "numpy", install)
    if embedded:
        await refused("unavailable", fresh.add("a fact"), "numpy", install)
    else:
        await fresh.add("a fact")  # nothing to rank: no numpy needed


async def stored_vectors(objects: ObjectStore) -> dict[str, list[tuple[str, bool]]]:
    """Each record's stored vectors: their models, latest first, and whether each is a refusal mark."""
    state = await LogFileStore(objects).state()
    bodies = {path.removesuffix(".json"): RecordBody.decode(live.text) for path, live in state.files.items()}
    return {found: [(one.model, one.refused) for one in body.embeddings] for found, body in bodies.items() if body}


async def test_a_write_back_keeps_the_vectors_another_model_wrote_meanwhile() -> None:
    """Issue 42: two models in two processes; the one that writes back second joins the first's
    vectors (it re-reads the record at its commit) rather than replacing them."""
    objects = MemoryObjectStore()
    ids = await seeded(objects, ["green tea at standup", "deploys on tuesdays"])
    first, second = ScriptedModel("first"), ScriptedModel("second", 32)
    searcher, other = store_on(objects, first), store_on(objects, second)

    async def other_model_writes_back() -> None:
        await other.search("deploys", limit=1)

    first.during = other_model_writes_back
    await searcher.search("standup", limit=2)
    vectors = await stored_vectors(objects)
    assert vectors == {found: [("test:first", False), ("test:second", False)] for found in ids}
    first.calls.clear()
    second.calls.clear()
    for store in (searcher, other, store_on(objects, ScriptedModel("first")), store_on(objects, second)):
        await store.search("tea", limit=1)
    assert first.calls == [1] and second.calls == [1, 1], "only the queries: nothing was undone"


def test_a_fifth_model_drops_the_vector_written_longest_ago() -> None:
    body = RecordBody("green tea", time_text(1.7e9))
    for name in ("a", "b", "c", "d", "e", "c"):
        body = body.with_vector(Embedding(name, "AAAA"))
    assert [one.model for one in body.embeddings] == ["c", "e", "d", "b"]
    assert RecordBody.decode(body.encode()) == body


async def test_a_vector_that_would_outgrow_the_file_drops_the_other_models() -> None:
    """Two vectors of 13,000 dimensions take 69 KB, more than a file holds; one fits."""
    objects = MemoryObjectStore()
    added = await store_on(objects, ScriptedModel("old", 13_000)).add("green tea at standup")
    new = ScriptedModel("new", 13_000)
    await store_on(objects, new).search("tea", limit=1)
    assert (await stored_vectors(objects))[added.id] == [("test:new", False)]
    new.calls.clear()
    await store_on(objects, new).search("tea", limit=1)
    assert new.calls == [1], "kept: a later search embeds only its query"


async def test_a_refusal_mark_forged_by_a_writer_costs_only_the_vector_and_a_new_text_clears_it() -> None:
    """A writer with PutObject can mark a record refused for a model: it is searched by words (and
    named by `records doctor`), as it could have made the record say anything; an update clears it."""
    objects = MemoryObjectStore()
    model = ScriptedModel()
    marked = RecordBody("green tea at standup", time_text(1.7e9), (Embedding("test:hashing-v1", ""),))
    await MemoryAdmin(LogFileStore(objects)).put_files(
        {"ab" * 16 + ".json": marked.encode()}, replace=False, origin=ORIGIN
    )
    store = store_on(objects, model)
    assert [record.id for record in await store.search("green tea", limit=1)] == ["ab" * 16]
    assert model.calls == [1], "the marked text is not sent"
    assert await store.search("deploys", limit=1) == (), "no vector: not a candidate by meaning alone"
    await store.update("ab" * 16, "green tea at the standup")
    assert (await stored_vectors(objects))["ab" * 16] == [("test:hashing-v1", False)]


class RefusingDocuments(ScriptedModel):
    """The offline model whose provider refuses every document (a 400), after `during`."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        if input_type != "document":
            return await super().embed(inputs, input_type=input_type, settings=settings)
        if self.during is not None:
            during, self.during = self.during, None
            await during()
        raise ModelHTTPError(400, self.model_name, body="input exceeds the model's token limit")


async def test_a_refusal_mark_never_replaces_a_vector_another_process_made_meanwhile() -> None:
    """Two processes with one model: one's provider refuses the text while the other's embeds it
    and writes the vector back first. The refusal, merged into the record as it is by then, would
    have replaced the good vector with a mark (searched by words until the text changed)."""
    objects = MemoryObjectStore()
    (found,) = await seeded(objects, ["green tea at standup"])
    other = store_on(objects, ScriptedModel("same"))
    refusing = RefusingDocuments("same")

    async def the_other_embeds_it() -> None:
        await other.search("tea", limit=1)

    refusing.during = the_other_embeds_it
    await store_on(objects, refusing).search("tea", limit=1)
    assert (await stored_vectors(objects))[found] == [("test:same", False)]
