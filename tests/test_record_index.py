"""The kept record index: BM25 scores exactly as bm25s's, kept up to date by changes rather than
rebuilt (and equal to a rebuild after any of them), searches that hold their own snapshot, a
bounded number of segments and made vectors, records decoded by the same rules as pydantic's
models, and first searches of large memories that do not stall the event loop."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from typing import Annotated, Any

import bm25s
import pytest
import Stemmer
from a13n_harness.providers.memory import MemoryStoreError, Origin
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_ai import Embedder

from bucket_memory import LogFileStore, LogRecordStore, MemoryAdmin
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.wire_values import Time, time_text
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.record_format import MAX_VECTORS, Embedding, RecordBody, packed
from bucket_memory.testing.embeddings import HashingEmbeddingModel
from bucket_memory.testing.stalls import stall_meter

from .test_event_loop import LONGEST_STALL

ORIGIN = Origin(principal_id="index-test")
WORDS = ["tea", "green", "coffee", "the", "and", "standup", "deploys", "tuesday", "café", "x", "5", "42", "🍵", "of"]


def records_on(objects: ObjectStore, embedded: bool = False, **settings: Any) -> LogRecordStore:
    embedder = Embedder(HashingEmbeddingModel()) if embedded else None
    return LogRecordStore(LogFileStore(objects, max_bytes=2**30), embedder=embedder, origin=ORIGIN, **settings)


def bm25s_scores(texts: Sequence[str], query: str, *, stemmed: bool = True) -> list[float]:
    """bm25s's scores of each text for the query, configured as its docs recommend (English
    stopwords, a Snowball stemmer): what the store's BM25 promises to match."""
    stemmer = Stemmer.Stemmer("english") if stemmed else None
    index = bm25s.BM25()
    index.index(bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    asked = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
    words = [word for word in asked if word in index.vocab_dict]
    return [float(score) for score in index.get_scores(words)] if words else [0.0] * len(texts)


async def check_bm25(store: LogRecordStore, queries: Sequence[str]) -> None:
    held = {record.id: record.text for record in (await store.list(limit=10_000)).records}
    ids = list(held)
    for query in queries:
        expected = dict(zip(ids, bm25s_scores([held[record_id] for record_id in ids], query), strict=True))
        found = {record.id: record.score for record in await store.search(query, limit=10_000)}
        assert set(found) == {record_id for record_id, score in expected.items() if score > 0}, query
        for record_id, score in found.items():
            assert math.isclose(score or 0, expected[record_id], rel_tol=1e-5), (query, held[record_id])


async def test_bm25_scores_are_bm25s_scores_through_adds_updates_and_deletes() -> None:
    chance = random.Random(5)
    store = records_on(MemoryObjectStore())
    queries = ["tea", "green tea", "tea tea coffee", "the and of", "café 42", "x 5 🍵", "Deploys on TUESDAY", "nothing"]
    added: list[str] = []
    for step in range(60):
        if added and step % 5 == 4:
            await store.update(chance.choice(added), " ".join(chance.choices(WORDS, k=chance.randint(0, 9))) or "x")
        elif added and step % 7 == 6:
            gone = chance.choice(added)
            added.remove(gone)
            await store.delete(gone)
        else:
            added.append((await store.add(" ".join(chance.choices(WORDS, k=chance.randint(1, 12))))).id)
        if step % 10 == 9:
            await check_bm25(store, queries)


async def test_an_index_kept_up_to_date_ranks_as_one_built_from_scratch() -> None:
    """Changes one at a time (merging segments as they go) against a cold store reading the result."""
    chance = random.Random(11)
    objects = MemoryObjectStore()
    kept = records_on(objects, embedded=True, ranking="hybrid")
    ids: list[str] = []
    for step in range(150):
        text = " ".join(chance.choices(WORDS, k=chance.randint(1, 8)))
        if ids and step % 4 == 3:
            await kept.update(chance.choice(ids), text)
        elif ids and step % 9 == 8:
            await kept.delete(ids.pop(chance.randrange(len(ids))))
        else:
            ids.append((await kept.add(text)).id)
        if step % 30 == 29:
            for ranking in ("hybrid", "vectors", "bm25"):
                cold = records_on(objects, embedded=True, ranking=ranking)
                warm = records_on(objects, embedded=True, ranking=ranking)
                warm._recall.index = kept._recall.index  # the kept index, with its history of changes
                for query in ("green tea", "deploys tuesday", "café 42 x"):
                    expected = [(r.id, round(r.score or 0, 5)) for r in await cold.search(query, limit=20)]
                    assert [(r.id, round(r.score or 0, 5)) for r in await warm.search(query, limit=20)] == expected
    assert len(kept._recall.index._current.segments) <= math.log2(len(ids)) + 1  # type: ignore[union-attr]


async def test_segments_and_made_vectors_stay_bounded_by_the_live_records() -> None:
    objects = MemoryObjectStore()
    writer = records_on(objects)  # no embedder: records stored without vectors
    ids = [(await writer.add(f"fact {n} about tea")).id for n in range(200)]
    reader = LogRecordStore(LogFileStore(objects, read_only=True), embedder=Embedder(HashingEmbeddingModel()))
    await reader.search("tea", limit=3)  # embeds all 200, kept in the process (a read-only store)
    snapshot = reader._recall.index._current
    assert snapshot is not None and sum(len(made.ids) for made in snapshot.made.values()) == 200
    for record_id in ids[:190]:
        await writer.delete(record_id)
    await reader.search("tea", limit=3)
    snapshot = reader._recall.index._current
    assert snapshot is not None
    assert sum(len(made.ids) for made in snapshot.made.values()) == 10  # the deleted records' vectors are gone
    assert sum(len(segment.ids) for segment in snapshot.segments) <= 2 * 10  # and their slots, mostly


async def test_a_search_ranks_the_snapshot_it_took() -> None:
    objects = MemoryObjectStore()
    store = records_on(objects)
    first = await store.add("green tea")
    state = await store.files.state()
    before = await store._recall.index.at(state)
    await store.update(first.id, "black coffee")
    await store.add("more green tea")
    after = await store._recall.index.at(await store.files.state())
    assert before is not after
    assert [(found, body.text) for found, _, body in before.records()] == [(first.id, "green tea")]
    assert sorted(body.text for _, _, body in after.records()) == ["black coffee", "more green tea"]


class _ReferenceEmbedding(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    model: Annotated[str, Field(min_length=1)]
    vector: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]*={0,2}$")]


class _ReferenceBody(BaseModel):
    """The record format as pydantic models, which `RecordBody.decode` replaced for speed."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    text: str
    updated_at: Time
    embedding: _ReferenceEmbedding | None = None
    embeddings: Annotated[list[_ReferenceEmbedding], Field(min_length=2, max_length=MAX_VECTORS)] | None = None

    @model_validator(mode="after")
    def _one_vector_a_model(self) -> _ReferenceBody:
        if self.embedding is not None and self.embeddings is not None:
            raise ValueError("one form")
        if self.embeddings is not None and len({one.model for one in self.embeddings}) < len(self.embeddings):
            raise ValueError("one vector a model")
        return self


def reference(text: str) -> RecordBody | None:
    try:
        body = _ReferenceBody.model_validate_json(text)
    except ValidationError:
        return None
    if canonical(body.model_dump(mode="json", exclude_none=True)).decode() != text:
        return None
    stored = [body.embedding] if body.embedding is not None else body.embeddings or []
    return RecordBody(body.text, body.updated_at, tuple(Embedding(one.model, one.vector) for one in stored))


def _model_of(embedding: Any) -> str:
    return str(embedding["model"])


_TIMES = st.floats(min_value=0, max_value=4e9).map(time_text)
_BASE64 = st.from_regex(r"\A[A-Za-z0-9+/]*={0,2}\Z")
_EMBEDDING: st.SearchStrategy[dict[str, str]] = st.fixed_dictionaries(
    {"model": st.text(min_size=1, max_size=3), "vector": _BASE64}
)
_VECTORS: dict[str, st.SearchStrategy[Any]] = {
    "embedding": _EMBEDDING,
    "embeddings": st.lists(_EMBEDDING, min_size=2, max_size=MAX_VECTORS, unique_by=_model_of),
}
_VALID = st.fixed_dictionaries({"text": st.text(), "updated_at": _TIMES}, optional=_VECTORS)
_HOSTILE = st.fixed_dictionaries(
    {
        "text": st.one_of(st.text(), st.integers(), st.none()),
        "updated_at": st.one_of(
            _TIMES, st.from_regex(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z"), st.text(), st.integers()
        ),
    },
    optional={
        "embedding": st.one_of(
            st.fixed_dictionaries(
                {
                    "model": st.one_of(st.text(max_size=20), st.integers()),
                    "vector": st.one_of(st.from_regex(r"\A[A-Za-z0-9+/=]*\Z"), st.text(max_size=20), st.none()),
                }
            ),
            st.dictionaries(st.sampled_from(["model", "vector", "other"]), st.text(max_size=5), max_size=3),
            st.none(),
            st.text(max_size=5),
        ),
        "embeddings": st.one_of(st.lists(_EMBEDDING, max_size=MAX_VECTORS + 2), st.none(), st.text(max_size=5)),
        "extra": st.text(max_size=3),
    },
)
_BODIES = st.one_of(_VALID, _HOSTILE)


@settings(max_examples=600, deadline=None)
@given(body=_BODIES, canonical_form=st.booleans(), cut=st.integers(min_value=0, max_value=3))
def test_records_decode_by_the_rules_of_the_pydantic_models(
    body: dict[str, Any], canonical_form: bool, cut: int
) -> None:
    if canonical_form:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    else:
        text = json.dumps(body, indent=cut or None, ensure_ascii=bool(cut % 2))
    for candidate in (text, text[:-cut] if cut else text, text.replace("}", "} ", 1)):
        assert RecordBody.decode(candidate) == reference(candidate), candidate


@pytest.mark.parametrize("ranking", [pytest.param("hybrid", marks=pytest.mark.slow), "bm25"])
async def test_a_first_search_of_a_large_memory_does_not_stall_the_loop(ranking: str) -> None:
    import numpy

    objects = MemoryObjectStore()
    model = HashingEmbeddingModel(dimensions=384)
    embedder = Embedder(model) if ranking == "hybrid" else None
    chance = random.Random(3)
    texts = [" ".join(chance.choices(WORDS, k=10)) + f" number{n}" for n in range(20_000)]
    bodies = {f"{n:032x}.json": RecordBody(text, time_text(1.7e9)) for n, text in enumerate(texts)}
    if embedder is not None:  # stored with their vectors, as records added with this embedder are
        rows = numpy.asarray((await embedder.embed_documents(texts)).embeddings, dtype=numpy.float32)
        rows /= numpy.linalg.norm(rows, axis=1, keepdims=True)
        bodies = {
            path: RecordBody(body.text, body.updated_at, (Embedding("test:hashing-v1", packed(row)),))
            for (path, body), row in zip(bodies.items(), rows, strict=True)
        }
    seeding = LogFileStore(objects, max_bytes=2**30)
    await MemoryAdmin(seeding).put_files(
        {path: body.encode() for path, body in bodies.items()}, replace=False, origin=ORIGIN
    )
    store = LogRecordStore(LogFileStore(objects, max_bytes=2**30), embedder=embedder, ranking=ranking)  # type: ignore[arg-type]
    await store.files.state()  # the log's own cold start, which test_event_loop measures
    model.embedded.clear()
    async with stall_meter() as searching:
        assert len(await store.search("green tea number7", limit=5)) == 5
        await store.add("green tea once more")
        await store.search("green tea", limit=5)
        await store.list(limit=5)
    assert searching.longest < LONGEST_STALL, f"searching stalled the loop for {searching.longest:.3f} s"
    assert len(model.embedded) == (3 if embedder else 0)  # two queries and the add: every vector was read back


def test_hybrid_fuses_scores_so_a_weak_ranking_cannot_drag_a_strong_match_down() -> None:
    """Rank fusion made BM25's clear first and the vectors' tenth equal to a record both put third;
    scores keep how far apart the matches are, and a record with no vector is ranked by words."""
    import numpy

    from bucket_memory.records.recall import FUSION, convex

    nan = float("nan")
    words = [numpy.array([12.0, 3.0, 0.0]), numpy.array([0.0, 6.0])]
    cosines = [numpy.array([0.2, 0.6, 0.62]), numpy.array([nan, 0.4])]
    first, _ = convex(words, cosines, ceiling=4.0)
    assert first[1] > first[2], "a word and a close vector beat a slightly closer vector with no word"
    assert first[0] > first[2], "BM25's clear first stays ahead of the vectors' first with no word"
    (alone,) = convex([numpy.array([2.0, 1.0])], [numpy.array([nan, nan])], ceiling=4.0)
    assert alone[0] > alone[1], "no vectors at all: words alone"
    assert FUSION.share(0.0) == 0 and FUSION.share(FUSION.midpoint) == 0.5


async def test_the_labelled_set_is_well_formed_and_hybrid_ranking_keeps_what_each_finds() -> None:
    from benchmarks.recall_set import SET, recall_at_5

    labelled = json.loads(SET.read_text())
    assert len(labelled["records"]) >= 300 and len(labelled["questions"]) >= 70
    assert all(answer in labelled["records"] for question in labelled["questions"] for answer in question["answers"])
    found = await recall_at_5()
    assert found["bm25"]["rare word"] == 1.0
    # The hashing model knows no meaning, and a question with words no record holds ("What does the
    # Okta login cover?": login, cover) is handed mostly to the vectors (`recall.Fusion`): one such.
    assert found["hybrid"]["rare word"] >= 1.0 - 1 / 30
    assert found["hybrid"]["word form"] == found["bm25"]["word form"] == 1.0
    assert found["hybrid"]["all"] >= max(found["bm25"]["all"], found["vectors"]["all"]) - 0.05


@pytest.mark.parametrize("failing", ["segments", "postings", "rows"])
async def test_a_numpy_failure_while_indexing_or_ranking_is_unavailable(
    failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bucket_memory.records import record_index, vector_rows
    from bucket_memory.records.bm25 import Postings

    store = records_on(MemoryObjectStore(), embedded=True)
    await store.add("green tea")
    owner: Any = {"segments": record_index.Segment, "postings": Postings, "rows": vector_rows.Rows}[failing]

    def refuse(*args: object) -> None:
        raise MemoryError("Unable to allocate 150. MiB for an array with shape (100000, 384)")

    monkeypatch.setattr(owner, "of", refuse)
    fresh = records_on(store.files.objects, embedded=True)
    with pytest.raises(MemoryStoreError) as caught:
        await fresh.search("tea", limit=3)
    assert caught.value.code == "unavailable" and "MemoryError: Unable to allocate" in str(caught.value)
