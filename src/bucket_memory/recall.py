"""Ranking records against a query: BM25 over the texts, cosine similarity of an embedder's
vectors, or both fused by their ranks, on the snapshot of the records a search took.

Vectors are only compared within one space (`embedding.Space`). Records stored without a vector
of the embedder's space (written before it, or with another model) are embedded again in
batches; each batch is handed to `keep` (the store writes it back to the records) before the next
is asked for, so a failure part-way loses only its batch. Hybrid ranking is reciprocal-rank
fusion: each record scores the sum of 1 / (60 + its rank) in the BM25 and the vector ranking.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from a13n_harness.providers.memory import MemoryStoreError

from . import bm25
from .codec import OFF_LOOP_BYTES
from .embedding import Space, embed_documents, embed_query
from .options import Ranking
from .record_format import Embedding, packed
from .record_index import Record, RecordIndex, Snapshot, guarded

if TYPE_CHECKING:
    import numpy
    from pydantic_ai import Embedder

logger = logging.getLogger(__name__)

type Found = list[tuple[str, float]]  # record ids, best first, with their scores
type Keep = Callable[[Sequence[Record]], Awaitable[None]]  # records with the vectors made for them, to store
_FUSION_K = 60  # the constant of reciprocal-rank fusion (Cormack et al., 2009)


class Recall:
    """Searches of one store's records: its index, kept between searches, and how it ranks with an
    embedder (`ranking`; BM25 alone without one). Vectors missing are asked for `batch` texts at a time."""

    def __init__(self, batch: int, ranking: Ranking) -> None:
        self.batch = batch
        self.ranking = ranking
        self.index = RecordIndex()

    async def search(self, query: str, snapshot: Snapshot, limit: int, embedder: Embedder | None, keep: Keep) -> Found:
        """The ids of the `limit` records closest to `query`, best first, with their scores."""
        if limit <= 0 or not query.strip():
            return []
        depth = limit if embedder is None or self.ranking != "hybrid" else max(4 * limit, 50)
        if embedder is None or self.ranking == "bm25":
            return await _worked(snapshot, 16, lambda: _by_words(snapshot, query, limit))
        wanted = await embed_query(embedder, query)
        space, target = wanted.space, wanted.rows[0]
        missing = await _worked(snapshot, space.dimensions, lambda: snapshot.missing(space))
        if missing:
            snapshot = await self._embed(snapshot, missing, embedder, space, keep)
        if self.ranking == "vectors":
            return await _worked(snapshot, space.dimensions, lambda: _by_meaning(snapshot, space, target, limit))

        def fused() -> Found:
            return _fused((_by_meaning(snapshot, space, target, depth), _by_words(snapshot, query, depth)), limit)

        return await _worked(snapshot, space.dimensions, fused)

    async def embed_document(self, embedder: Embedder, text: str) -> Embedding:
        """One record's vector, as `add` and `update` store it."""
        async for made in embed_documents(embedder, [text], batch=1):
            return Embedding(model=made.space.model, vector=packed(made.rows[0]))
        raise AssertionError("one text makes one batch")

    async def _embed(
        self, snapshot: Snapshot, missing: list[Record], embedder: Embedder, space: Space, keep: Keep
    ) -> Snapshot:
        """`snapshot` with vectors for the records stored without one of `space`, made batch by
        batch; each batch is kept (in the index and through `keep`) before the next is asked for."""
        logger.info("embedding %d records stored without a %s vector", len(missing), space.model)
        done = 0
        try:
            async for made in embed_documents(embedder, [body.text for _, _, body in missing], batch=self.batch):
                batch = missing[done : done + len(made.rows)]
                await keep(
                    [_with_vector(record, made.space, row) for record, row in zip(batch, made.rows, strict=True)]
                )
                if made.space == space:
                    before, snapshot = snapshot, snapshot.with_made(space, made.rows, [found for found, _, _ in batch])
                    self.index.keep_made(before, snapshot)
                done += len(batch)
        except MemoryStoreError as error:
            raise MemoryStoreError(
                "unavailable",
                f"{error} {done} of the {len(missing)} records stored without a {space.model} vector were "
                "embedded and kept; the next search goes on from there.",
            ) from None
        return snapshot


def _with_vector(record: Record, space: Space, row: numpy.ndarray) -> Record:
    found, version, body = record
    return found, version, replace(body, embedding=Embedding(space.model, packed(row)))


def _by_words(snapshot: Snapshot, query: str, depth: int) -> Found:
    import numpy

    terms = bm25.query_terms(query)
    scores = bm25.scores(
        terms, [(segment.postings(), segment.live) for segment in snapshot.segments], snapshot.corpus()
    )
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


def _fused(rankings: Sequence[Found], limit: int) -> Found:
    """Reciprocal-rank fusion of `rankings`: a record scores the sum of 1 / (60 + its rank) in each."""
    fused: dict[str, float] = {}
    for ranked in rankings:
        for rank, (found, _) in enumerate(ranked, start=1):
            fused[found] = fused.get(found, 0.0) + 1 / (_FUSION_K + rank)
    return sorted(fused.items(), key=_order)[:limit]


async def _worked[T](snapshot: Snapshot, width: int, work: Callable[[], T]) -> T:
    """`work` on the snapshot, in a worker thread when it is large, its failures mapped (`guarded`)."""
    if snapshot.count() * max(width, 16) * 4 < OFF_LOOP_BYTES:
        return guarded(work)
    return await asyncio.to_thread(guarded, work)
