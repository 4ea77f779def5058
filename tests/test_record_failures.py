"""Whatever an embedder raises, a hybrid search answers: records whose texts it fails on alone are
marked once per space with why (and named by `records doctor`), never sent again while their text
stays; a failed call or query ranks by words with a notice on the answer and in telemetry.

What a broken implementation would get wrong: two refused records taking every search down with
nothing marked (a batch whose texts all fail alone was taken for a failing provider), a local
model's `ValueError` or an SDK's own exception type taking search down (only HTTP 400/413/422
counted as a text's failure), a failed query failing the search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin
from pydantic_ai import Embedder
from pydantic_ai.embeddings import EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.exceptions import ModelHTTPError

from bucket_memory import LogFileStore, LogRecordStore
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.record_format import RecordBody
from bucket_memory.runtime import telemetry
from bucket_memory.testing.embeddings import HashingEmbeddingModel

ORIGIN = Origin(principal_id="failures-test")


class ModelCrashed(Exception):
    """An exception type of a local model's own, which names nothing about HTTP."""


def _http_400() -> Exception:
    return ModelHTTPError(400, "hashing-v1", body="input exceeds the model's token limit")


def _value_error() -> Exception:
    return ValueError("token limit: sequence too long for the tokenizer")


def _own_type() -> Exception:
    return ModelCrashed("token limit: the tokenizer gave up")


class Failing(HashingEmbeddingModel):
    """The offline model; a call holding a document `fails` picks raises `error()`, and with
    `query_fails` so does every query."""

    def __init__(self, fails: Callable[[str], bool], error: Callable[[], Exception], query_fails: bool = False) -> None:
        super().__init__()
        self.fails, self.error, self.query_fails = fails, error, query_fails
        self.calls: list[tuple[str, int]] = []

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        self.calls.append((input_type, len(texts)))
        if (input_type == "query" and self.query_fails) or (
            input_type == "document" and any(self.fails(text) for text in texts)
        ):
            raise self.error()
        return await super().embed(inputs, input_type=input_type, settings=settings)


async def unembedded(objects: ObjectStore, texts: Sequence[str]) -> list[str]:
    plain = LogRecordStore(LogFileStore(objects), origin=ORIGIN)
    return [(await plain.add(text)).id for text in texts]


def store_on(objects: ObjectStore, model: Failing, **settings: object) -> LogRecordStore:
    return LogRecordStore(LogFileStore(objects), embedder=Embedder(model), origin=ORIGIN, **settings)  # type: ignore[arg-type]


async def stored(objects: ObjectStore) -> dict[str, RecordBody]:
    state = await LogFileStore(objects).state()
    return {
        path.removesuffix(".json"): body
        for path, live in state.files.items()
        if (body := RecordBody.decode(live.text)) is not None
    }


@pytest.mark.parametrize("error", [_http_400, _value_error, _own_type], ids=["http-400", "ValueError", "own-type"])
@pytest.mark.parametrize("others", [0, 3])
async def test_records_the_embedder_fails_on_are_searched_by_words_and_marked_once_with_why(
    error: Callable[[], Exception], others: int
) -> None:
    objects = MemoryObjectStore()
    bad = [f"LONG green tea note {n} " * 30 for n in range(2)]
    ids = await unembedded(objects, [*bad, *(f"note {n} about green tea" for n in range(others))])
    model = Failing(lambda text: text.startswith("LONG"), error)
    store = store_on(objects, model, embed_batch=4)
    recalled = await store.search("green tea", limit=10)
    assert {record.id for record in recalled} == set(ids), "every record is found, the failed ones by their words"
    assert recalled.notice is None, "a text's failure is marked, not a failure of the search"
    bodies = await stored(objects)
    marks = {found: body.embeddings[0] for found, body in bodies.items() if body.embeddings[0].refused}
    assert set(marks) == set(ids[:2])
    assert all(mark.dimensions == 64 and "token limit" in mark.reason for mark in marks.values())
    assert sum(not body.embeddings[0].refused for body in bodies.values()) == others
    calls = len(model.calls)
    assert {record.id for record in await store.search("green tea", limit=10)} == set(ids)
    assert len(model.calls) == calls + 1, "only the query: a failed text is not sent on every search"
    census = await store.census()
    (share,) = [one for one in census.models if one.refused]
    assert (share.model, share.dimensions, set(share.refused)) == ("test:hashing-v1", 64, set(ids[:2]))
    assert all("token limit" in reason for reason in share.reasons)
    elsewhere = Failing(lambda text: text.startswith("LONG"), error)
    assert len(await store_on(objects, elsewhere).search("green tea", limit=10)) == len(ids)
    assert elsewhere.calls == [("query", 1)], "another process reads the marks"


async def test_a_query_the_embedder_fails_on_is_answered_by_words_with_a_notice_and_a_count() -> None:
    objects = MemoryObjectStore()
    ids = await unembedded(objects, ["green tea at standup", "deploys on tuesdays"])
    model = Failing(lambda text: False, lambda: ModelHTTPError(503, "hashing-v1", body="overloaded"), query_fails=True)
    with telemetry.tallied() as tally:
        recalled = await store_on(objects, model).search("green tea", limit=5)
    assert [record.id for record in recalled] == [ids[0]]
    assert recalled.notice is not None and recalled.notice.query and "503" in recalled.notice.reason
    assert tally.searched_by_words == 2
    with pytest.raises(MemoryStoreError) as caught:
        await store_on(objects, model, ranking="vectors").search("green tea", limit=5)
    assert caught.value.code == "unavailable" and "503" in str(caught.value)
    assert all(not body.embeddings for body in (await stored(objects)).values()), "nothing marked for a failed call"


async def test_one_model_at_two_sizes_embeds_each_record_once_per_size() -> None:
    """A rollout of a size change (one model at 16 and at 48 dimensions, two processes searching in
    turn): each record is embedded once per size in all, and each size's vectors stand beside the
    other's. Before, each found the other's vector missing and wrote its own over it: 201 texts
    embedded at every search."""
    objects = MemoryObjectStore()
    ids = await unembedded(objects, [f"fact {n} about green tea" for n in range(40)])
    small, large = HashingEmbeddingModel("same", 16), HashingEmbeddingModel("same", 48)
    stores = [
        LogRecordStore(LogFileStore(objects), embedder=Embedder(model), origin=ORIGIN) for model in (small, large)
    ]
    for turn in range(6):
        assert len(await stores[turn % 2].search("green tea", limit=5)) == 5
    assert len(small.embedded) == len(large.embedded) == 40 + 3, "each record once, and a query a search"
    bodies = await stored(objects)
    assert {tuple(sorted((one.model, one.size) for one in bodies[found].embeddings)) for found in ids} == {
        (("test:same", 16), ("test:same", 48))
    }
    census = await stores[0].census()
    assert [(one.dimensions, one.vectors) for one in census.models] == [(16, 40), (48, 40)]


def test_records_stored_before_spaces_had_sizes_read_as_they_did() -> None:
    """A record's file from before (one vector as `embedding`; a mark with no size nor reason) reads
    the same: its vector in the space its length says, its mark standing for every size."""
    vector = RecordBody.decode(
        '{"embedding":{"model":"openai:small","vector":"ADwAPA=="},"text":"tea","updated_at":"2023-11-14T22:13:20.000Z"}'
    )
    assert vector is not None and vector.vector_of("openai:small", 2) is not None
    assert vector.vector_of("openai:small", 3) is None
    mark = RecordBody.decode(
        '{"embedding":{"model":"openai:small","vector":""},"text":"tea","updated_at":"2023-11-14T22:13:20.000Z"}'
    )
    assert mark is not None and all(mark.vector_of("openai:small", size) is not None for size in (2, 512))


@pytest.mark.parametrize("ranking_words", ["green tea standup kettle", "kettle"])
async def test_a_record_without_a_vector_is_found_by_hybrid_as_bm25_alone_finds_it(ranking_words: str) -> None:
    """A record the model failed on, holding every query word, first for BM25 alone: first for
    hybrid too. Before, its score was capped at the words' share while the best cosine got the
    meaning's: it ranked 20th, 13th and 14th behind records that shared a word or two."""
    objects = MemoryObjectStore()
    others = [
        f"note {n}: {'green' if n % 2 else 'tea'} leaves and {'standup' if n % 3 else 'kettle'} notes"
        for n in range(30)
    ]
    ids = await unembedded(objects, ["LONG " + ranking_words + " green tea at the standup with the kettle", *others])
    words = await LogRecordStore(LogFileStore(objects), origin=ORIGIN).search(ranking_words, limit=3)
    assert words[0].id == ids[0]
    model = Failing(lambda text: text.startswith("LONG"), _value_error)
    hybrid = await store_on(objects, model).search(ranking_words, limit=3)
    assert hybrid[0].id == ids[0]


class ZeroQueries(HashingEmbeddingModel):
    """The offline model, whose vector of any query is all zeros (similar to every record alike)."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        made = await super().embed(inputs, input_type=input_type, settings=settings)
        if input_type == "query":
            made.embeddings = [[0.0] * self.dimensions for _ in made.embeddings]
        return made


async def test_a_zero_query_vector_ranks_by_words_with_a_notice_not_arbitrary_records() -> None:
    """A zero query vector tied every vectored record: hybrid returned arbitrary ones (by id)."""
    objects = MemoryObjectStore()
    ids = await unembedded(objects, [*(f"aaa note {n} on deploys" for n in range(8)), "green tea at standup"])
    recalled = await LogRecordStore(LogFileStore(objects), embedder=Embedder(ZeroQueries()), origin=ORIGIN).search(
        "green tea", limit=3
    )
    assert [record.id for record in recalled] == [ids[-1]], "only the record holding the words"
    assert recalled.notice is not None and recalled.notice.query and "zero vector" in recalled.notice.reason


async def test_a_query_past_the_providers_token_limit_is_answered_by_words() -> None:
    objects = MemoryObjectStore()
    ids = await unembedded(objects, ["green tea at standup", "deploys on tuesdays"])
    too_long = ModelHTTPError(400, "hashing-v1", body="This model's maximum context length is 8192 tokens")
    model = Failing(lambda text: False, lambda: too_long, query_fails=True)
    recalled = await store_on(objects, model).search("green tea " * 4000, limit=5)
    assert [record.id for record in recalled] == [ids[0]]
    assert recalled.notice is not None and recalled.notice.query and "maximum context length" in recalled.notice.reason
