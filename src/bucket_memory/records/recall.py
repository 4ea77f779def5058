"""Ranking records against a query: BM25 over the texts, cosine similarity of an embedder's
vectors, or both fused by their scores, on the snapshot of the records a search took.

Vectors are only compared within one space (`embedding.Space`). Records stored without a vector
of the embedder's space (written before it, or with another model) are embedded again in
batches; each batch is handed to `keep` (the store writes it back to the records) before the next
is asked for, so a failure part-way loses only its batch. Hybrid ranking is a convex fusion of
scores, not of ranks (rank fusion gives a weak ranking as much say as a strong one), whose
weights follow the query: how much of it the best record holds in words (`Fusion`). Fixed
weights chosen on some sets fell below BM25 alone on a set of another kind (docs/performance.md,
"Recall").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a13n_harness.providers.memory import MemoryStoreError

from ..runtime import telemetry
from ..runtime.off_loop import OFF_LOOP_BYTES
from . import bm25
from .analyzer import Analyzer
from .embedding import Space, TextsRefused, Vectors, embed_documents, embed_query
from .ranking import Ranking
from .record_format import Embedding, packed
from .record_index import Record, RecordIndex, Snapshot, guarded

if TYPE_CHECKING:
    import numpy
    from pydantic_ai import Embedder

logger = logging.getLogger(__name__)

type Found = list[tuple[str, float]]  # record ids, best first, with their scores
type Keep = Callable[[Sequence[Record]], Awaitable[None]]  # records with the vectors made for them, to store
# Seconds before a store that could not write a refusal mark back asks for the text again.
REFUSAL_RETRY = 3600.0
# Seconds a space's records are not sent again after its embedder failed a call (not its texts).
REST = 60.0


@dataclass(frozen=True, slots=True)
class Fusion:
    """How hybrid weighs BM25 against cosine for a query: each ranking's scores are put on a scale of
    their own, standardized over its `depth` best (their mean 0, their spread 1; `depth` 0: BM25
    over its best, cosine min-max over all), and BM25's share follows how much of the query its
    best record matches (`share`): a query whose words a record holds is answered by words, one
    whose words no record holds (a paraphrase) by meaning, whatever the set."""

    depth: int
    midpoint: float  # the coverage (best BM25 score over the query's ceiling) at which both count alike

    def share(self, coverage: float) -> float:
        """BM25's share for a query whose best record scores `coverage` times its ceiling
        (`bm25.Scored`): 0 with no word matched, a half at the midpoint, toward 1 above it."""
        if coverage <= 0:
            return 0.0
        return coverage**2 / (coverage**2 + self.midpoint**2)


# Hybrid's fusion, chosen by `make bench` (benchmarks/fusion.py) on three labelled sets of different
# kinds, and measured on each with the fusion chosen on the other two (docs/performance.md, "Recall").
FUSION = Fusion(depth=20, midpoint=0.25)


def _scaled(scores: numpy.ndarray, depth: int, floor: bool) -> numpy.ndarray:
    """`scores` (NaN: none) on the fusion's scale: standardized over the `depth` best, or with
    `depth` 0, over the best (`floor`: and the worst) of them."""
    import numpy

    known = scores[~numpy.isnan(scores)]
    if known.size == 0:
        return scores
    if depth == 0:
        low = float(known.min()) if floor else 0.0
        spread = float(known.max()) - low
        return (scores - low) / spread if spread > 0 else numpy.where(numpy.isnan(scores), numpy.nan, 0.0)
    best = numpy.partition(known, known.size - min(depth, known.size))[known.size - min(depth, known.size) :]
    spread = float(best.std())
    if spread <= 0:  # no score stands out (or a zero query vector): this ranking says nothing
        return numpy.where(numpy.isnan(scores), numpy.nan, 0.0)
    scaled: numpy.ndarray = (scores - float(best.mean())) / spread
    return scaled


@dataclass(frozen=True, slots=True)
class Notice:
    """Why a search ranked some records by their words alone: the query's vector could not be made
    (`query`: every record was), or `records` records had no vector the embedder could make at this
    search (a call failure, or the deadline; not a text it fails on, which is marked). `reason`
    says what failed."""

    query: bool
    records: int
    reason: str


type Ranked = tuple[Found, Notice | None]


class Recall:
    """Searches of one store's records: its index, kept between searches, and how it ranks with an
    embedder (`ranking`; BM25 alone without one) and the terms BM25 counts (`analyzer`). Vectors
    missing are asked for `batch` texts at a time. Whatever the embedder raises, a hybrid search
    answers (`Notice`); only a "vectors" search whose query has no vector fails."""

    def __init__(self, batch: int, ranking: Ranking, analyzer: Analyzer) -> None:
        self.batch = batch
        self.ranking = ranking
        self.analyzer = analyzer
        self.index = RecordIndex()
        # (space, record id, version) -> when the embedder may be asked again for a text it failed
        # on (for a store that could not write the mark back)
        self._refused: dict[tuple[Space, str, int], float] = {}
        # space -> until when, and why, its embedder's calls failed: records are not sent meanwhile
        self._resting: dict[Space, tuple[float, str]] = {}

    async def search(self, query: str, snapshot: Snapshot, limit: int, embedder: Embedder | None, keep: Keep) -> Ranked:
        """The ids of the `limit` records closest to `query`, best first, with their scores, and
        what was ranked by words alone for want of a vector."""
        if limit <= 0 or not query.strip():
            return [], None
        if embedder is None or self.ranking == "bm25":
            return await _worked(snapshot, 16, lambda: _by_words(snapshot, self.analyzer, query, limit)), None
        try:
            wanted = await embed_query(embedder, query)
            if not wanted.rows[0].any():  # similar to every record alike: the vectors cannot rank them
                raise MemoryStoreError(
                    "unavailable",
                    f"The embedder {_named(wanted.space)} made a zero vector of the query, which no vector is near; "
                    "search with ranking hybrid or bm25, or reword the query.",
                )
        except MemoryStoreError as error:
            if self.ranking == "vectors":
                raise
            said = _noticed(Notice(query=True, records=snapshot.count(), reason=str(error)))
            return await _worked(snapshot, 16, lambda: _by_words(snapshot, self.analyzer, query, limit)), said
        space, target = wanted.space, wanted.rows[0]
        missing = await _worked(snapshot, space.dimensions, lambda: snapshot.missing(space))
        notice: Notice | None = None
        if missing:
            snapshot, notice = await self._embed(snapshot, missing, embedder, space, keep)
        if self.ranking == "vectors":
            found = await _worked(snapshot, space.dimensions, lambda: _by_meaning(snapshot, space, target, limit))
            return found, notice
        found = await _worked(
            snapshot, space.dimensions, lambda: _by_both(snapshot, self.analyzer, space, query, target, limit)
        )
        return found, notice

    async def embed_document(self, embedder: Embedder, text: str) -> Embedding:
        """One record's vector, as `add` and `update` store it."""
        async for made in embed_documents(embedder, [text], batch=1):
            return Embedding(model=made.space.model, vector=packed(made.rows[0]))
        raise AssertionError("one text makes one batch")

    async def _embed(
        self, snapshot: Snapshot, missing: list[Record], embedder: Embedder, space: Space, keep: Keep
    ) -> tuple[Snapshot, Notice | None]:
        """`snapshot` with vectors for the records stored without one of `space`, made batch by
        batch; each batch is kept (in the index and through `keep`) before the next is asked for.
        A batch the embedder fails on is split to find the texts it fails on alone: those are kept
        marked with the failure for the space (ranked by words, never sent again while their text
        stays). A failed call (not its texts) or the deadline ends the embedding: the records left
        are ranked by words, and none is sent again for `REST` seconds (the `Notice` says so)."""
        now = time.monotonic()
        resting, why = self._resting.get(space, (now, ""))
        wanted = [record for record in missing if now >= self._refused.get((space, *record[:2]), now)]
        if not wanted:
            return snapshot, None
        if now < resting:
            return snapshot, _noticed(Notice(query=False, records=len(wanted), reason=why))
        logger.info("embedding %d records stored without a %s vector", len(wanted), _named(space))
        done = 0
        try:
            for start in range(0, len(wanted), self.batch):
                batch = wanted[start : start + self.batch]
                made, refused = await self._made(embedder, batch, space)
                await keep([*(_with(record, _stored(vectors.space, row)) for record, vectors, row in made), *refused])
                fitting = [(record, row) for record, vectors, row in made if vectors.space == space]
                if fitting:
                    import numpy

                    rows = numpy.stack([row for _, row in fitting])
                    before, snapshot = (
                        snapshot,
                        snapshot.with_made(space, rows, [found for (found, _, _), _ in fitting]),
                    )
                    self.index.keep_made(before, snapshot)
                done += len(batch)
        except MemoryStoreError as error:
            reason = (
                f"{error} {done} of the {len(wanted)} records stored without a {_named(space)} vector were "
                f"embedded and kept; the others are searched by words until a search {REST:.0f} s from now."
            )
            self._resting[space] = (time.monotonic() + REST, reason)
            return snapshot, _noticed(Notice(query=False, records=len(wanted) - done, reason=reason))
        return snapshot, None

    async def _made(self, embedder: Embedder, batch: list[Record], space: Space) -> tuple[list[Made], list[Record]]:
        """The vectors of a batch's records, and those records marked with the failure of the texts
        the embedder fails on alone (also kept in this process, for a store that cannot write the
        mark back). A failed call, not of its texts, is raised."""
        made, failed = await _split(embedder, batch)
        marked = []
        for (found, version, body), reason in failed:
            self._refused[(space, found, version)] = time.monotonic() + REFUSAL_RETRY
            telemetry.count("embeddings_refused")
            logger.warning(
                "%s failed on the text of record %s (%s); it is searched by words", _named(space), found, reason
            )
            marked.append((found, version, body.with_vector(Embedding(space.model, "", space.dimensions, reason))))
        return made, marked


type Made = tuple[Record, Vectors, "numpy.ndarray"]


async def _split(embedder: Embedder, batch: list[Record]) -> tuple[list[Made], list[tuple[Record, str]]]:
    """The batch's vectors in one call, or when the embedder fails on its texts, its halves'
    (recursively): what was made, and the records whose texts it fails on alone, with what it
    raised. A failed call is raised: a split would only send more calls to a failing provider."""
    try:
        vectors = await anext(embed_documents(embedder, [body.text for _, _, body in batch], batch=len(batch)))
    except TextsRefused as error:
        if len(batch) == 1:
            return [], [(batch[0], error.reason)]
        made, failed = [], []
        for half in (batch[: len(batch) // 2], batch[len(batch) // 2 :]):
            half_made, half_failed = await _split(embedder, half)
            made += half_made
            failed += half_failed
        return made, failed
    return [(record, vectors, row) for record, row in zip(batch, vectors.rows, strict=True)], []


def _noticed(notice: Notice) -> Notice:
    """`notice`, counted in telemetry and logged once per search."""
    telemetry.count("searched_by_words", notice.records)
    what = "the query" if notice.query else f"{notice.records} records"
    logger.warning("a search ranked %s by words alone: %s", what, notice.reason)
    return notice


def _named(space: Space) -> str:
    return f"{space.model} ({space.dimensions} dimensions)"


def _stored(space: Space, row: numpy.ndarray) -> Embedding:
    return Embedding(space.model, packed(row))


def _with(record: Record, embedding: Embedding) -> Record:
    found, version, body = record
    return found, version, body.with_vector(embedding)


def _by_words(snapshot: Snapshot, analyzer: Analyzer, query: str, depth: int) -> Found:
    import numpy

    groups = [(segment.postings(analyzer), segment.live) for segment in snapshot.segments]
    scores = bm25.scores(analyzer.query_terms(query), groups, snapshot.corpus(analyzer))
    hits = [numpy.flatnonzero(found > 0) for found in scores]
    return _best(snapshot, hits, [found[slots] for found, slots in zip(scores, hits, strict=True)], depth)


def _by_meaning(snapshot: Snapshot, space: Space, target: numpy.ndarray, depth: int) -> Found:

    slots, scores = [], []
    for segment in snapshot.segments:
        found_slots, found_scores = segment.rows(space).scores(target, segment.live)
        slots.append(found_slots)
        scores.append(found_scores)
    found = _best(snapshot, slots, scores, depth)
    made = snapshot.made.get(space)
    if made is None:
        return found
    extra = made.matrix @ target
    return sorted([*found, *zip(made.ids, extra.tolist(), strict=True)], key=_order)[:depth]


def _best(snapshot: Snapshot, slots: list[numpy.ndarray], scores: list[numpy.ndarray], depth: int) -> Found:
    """The `depth` best (segment, slot) pairs of the snapshot by score, as record ids; equal scores
    in id order, so that how records happen to be grouped in segments never decides."""
    import numpy

    if not slots or depth <= 0:
        return []
    joined = numpy.concatenate(scores)
    owners = numpy.repeat(numpy.arange(len(slots)), [len(part) for part in slots])
    where = numpy.concatenate(slots)
    chosen = numpy.arange(len(joined))
    if len(joined) > depth:  # the best `depth` in linear time, with every record tied with the last of them
        chosen = numpy.flatnonzero(joined >= numpy.partition(joined, len(joined) - depth)[len(joined) - depth])
    segments = snapshot.segments
    found = [(segments[owners[n]].ids[where[n]], float(joined[n])) for n in chosen.tolist()]
    return sorted(found, key=_order)[:depth]


def _order(item: tuple[str, float]) -> tuple[float, str]:
    return -item[1], item[0]


def _by_both(
    snapshot: Snapshot, analyzer: Analyzer, space: Space, query: str, target: numpy.ndarray, depth: int
) -> Found:
    """Hybrid: every live record scored by `convex` from its BM25 score and its cosine (none for a
    record with no vector of `space`: searched by words alone)."""
    import numpy

    segments = snapshot.segments
    groups = [(segment.postings(analyzer), segment.live) for segment in segments]
    matched = bm25.scored(analyzer.query_terms(query), groups, snapshot.corpus(analyzer))
    words = matched.scores
    cosines = [numpy.full(len(segment.live), numpy.nan, dtype=numpy.float32) for segment in segments]
    for segment, into in zip(segments, cosines, strict=True):
        slots, scores = segment.rows(space).scores(target, segment.live)
        into[slots] = scores
    if (made := snapshot.made.get(space)) is not None:
        for found, score in zip(made.ids, (made.matrix @ target).tolist(), strict=True):
            if (where := snapshot.find(found)) is not None:
                cosines[where[0]][where[1]] = score
    live = [numpy.flatnonzero(segment.live) for segment in segments]
    said = [found[slots] for found, slots in zip(words, live, strict=True)]
    near = [found[slots] for found, slots in zip(cosines, live, strict=True)]
    fused = convex(said, near, matched.ceiling)
    # A record with a vector is a candidate, as in the vector ranking; one without, only by its words.
    kept = [numpy.flatnonzero((a > 0) | ~numpy.isnan(b)) for a, b in zip(said, near, strict=True)]
    return _best(
        snapshot,
        [slots[n] for slots, n in zip(live, kept, strict=True)],
        [scores[n] for scores, n in zip(fused, kept, strict=True)],
        depth,
    )


def convex(words: Sequence[numpy.ndarray], cosines: Sequence[numpy.ndarray], ceiling: float) -> list[numpy.ndarray]:
    """Each record's hybrid score, per group, by `FUSION` over all the groups at once (`fused_scores`)."""
    import numpy

    if not words:
        return []
    fused = fused_scores(FUSION, numpy.concatenate(words), numpy.concatenate(cosines), ceiling)
    return numpy.split(fused, numpy.cumsum([len(group) for group in words])[:-1])


def fused_scores(
    fusion: Fusion, words: numpy.ndarray, cosines: numpy.ndarray, ceiling: float, share: float | None = None
) -> numpy.ndarray:
    """Each record's hybrid score: BM25's share of its BM25 score plus the rest of its cosine, each
    on its scale (`Fusion`), the share the query's (`Fusion.share` of the best BM25 score over
    `ceiling`) unless a fixed `share` is given (the benchmark's curves). A record without a vector
    (NaN) has its scaled BM25 score for both shares, so that it competes on the one scale. A
    fusion of scores, not of ranks: rank fusion gave a weak ranking's tenth best as much say as
    the other's first."""
    import numpy

    if share is None:
        best = float(words.max()) if words.size else 0.0
        share = fusion.share(best / ceiling if ceiling > 0 else 0.0)
    worded = _scaled(words, fusion.depth, floor=False)
    scaled = _scaled(cosines, fusion.depth, floor=True)
    meaning = numpy.where(numpy.isnan(scaled), worded, scaled)
    fused: numpy.ndarray = share * worded + (1 - share) * meaning
    return fused


async def _worked[T](snapshot: Snapshot, width: int, work: Callable[[], T]) -> T:
    """`work` on the snapshot, in a worker thread when it is large, its failures mapped (`guarded`)."""
    if snapshot.count() * max(width, 16) * 4 < OFF_LOOP_BYTES:
        return guarded(work)
    return await asyncio.to_thread(guarded, work)
