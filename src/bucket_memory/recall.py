"""Ranking records against a query: cosine similarity of an embedder's vectors, or BM25 over the texts.

Vectors are only compared within one vector space: the same embedding model (as its provider
names it) and the same number of dimensions. Records whose stored vector is of another space, or
that have none, are embedded again in batches; each batch is handed to `keep` (the store writes
it back to the records) before the next is asked for, so a failure part-way loses only its batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from a13n_harness.providers.memory import MemoryStoreError

from .embedding import Space, embed_documents, embed_query
from .record_format import Embedding, RecordBody, packed, unpacked

if TYPE_CHECKING:
    import numpy
    from pydantic_ai import Embedder

logger = logging.getLogger(__name__)

type Held = Mapping[str, tuple[int, RecordBody]]  # record id -> (its file's version, the record)
type Keep = Callable[[Sequence[tuple[str, int, RecordBody]]], Awaitable[None]]  # (id, version, new body)


class Ranking:
    """What ranking keeps between searches of one store: the BM25 index of the texts last ranked,
    and the vectors made for records stored without one of the embedder's space (only the live
    records' are kept). Vectors missing are asked for `batch` texts at a time."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self._index: tuple[tuple[tuple[str, str], ...], Any] | None = None  # ((id, text), ...), bm25s.BM25
        self._made: dict[tuple[Space, str], numpy.ndarray] = {}  # (space, text) -> unit vector
        self._stored: dict[str, numpy.ndarray | None] = {}  # a stored vector's text -> its unit vector

    async def embed_document(self, embedder: Embedder, text: str) -> Embedding:
        """One record's vector, as `add` and `update` store it."""
        async for made in embed_documents(embedder, [text], batch=1):
            return Embedding(model=made.space.model, vector=packed(made.rows[0]))
        raise AssertionError("one text makes one batch")

    async def rank(
        self, query: str, held: Held, limit: int, embedder: Embedder | None, keep: Keep
    ) -> list[tuple[str, float]]:
        """The ids of the `limit` records closest to `query`, best first, with their scores."""
        if limit <= 0 or not held or not query.strip():
            return []
        if embedder is None:
            return await asyncio.to_thread(_mapped, self._lexical, query, held, limit)
        return await self._by_meaning(query, held, limit, embedder, keep)

    def _lexical(self, query: str, held: Held, limit: int) -> list[tuple[str, float]]:
        import bm25s

        corpus = tuple(sorted((record_id, body.text) for record_id, (_, body) in held.items()))
        kept = self._index  # read once: another search's thread may swap in the index of another corpus
        if kept is None or kept[0] != corpus:
            tokens = bm25s.tokenize([text for _, text in corpus], stopwords="en", show_progress=False)
            if not tokens.vocab:  # no record has a word BM25 counts ("👍", "5", "x"): nothing can match
                return []
            index = bm25s.BM25()
            index.index(tokens, show_progress=False)
            self._index = kept = (corpus, index)  # never changed after: a search holds its own
        query_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not query_tokens.vocab:
            return []
        found, scores = kept[1].retrieve(query_tokens, k=min(limit, len(corpus)), show_progress=False)
        return [(corpus[int(n)][0], float(score)) for n, score in zip(found[0], scores[0], strict=True) if score > 0]

    async def _by_meaning(
        self, query: str, held: Held, limit: int, embedder: Embedder, keep: Keep
    ) -> list[tuple[str, float]]:
        wanted = await embed_query(embedder, query)
        space, target = wanted.space, wanted.rows[0]
        vectors: dict[str, numpy.ndarray] = {}
        missing: list[str] = []
        for record_id, (_, body) in held.items():
            stored = body.embedding
            vector = self._unpacked(stored.vector) if stored is not None and stored.model == space.model else None
            if vector is not None and len(vector) == space.dimensions:
                vectors[record_id] = vector
            elif (made := self._made.get((space, body.text))) is not None:
                vectors[record_id] = made
            else:
                missing.append(record_id)
        self._forget(held, space)
        if missing:
            await self._embed_missing(embedder, space, missing, held, vectors, keep)
        return _mapped(_closest, vectors, target, limit)

    async def _embed_missing(
        self,
        embedder: Embedder,
        space: Space,
        missing: list[str],
        held: Held,
        vectors: dict[str, numpy.ndarray],
        keep: Keep,
    ) -> None:
        """Embed the records stored without a vector of `space` (another model's, or none), batch by
        batch, keeping each batch (here and through `keep`) before asking for the next."""
        logger.info("embedding %d records stored without a %s vector", len(missing), space.model)
        done = 0
        try:
            async for made in embed_documents(embedder, [held[i][1].text for i in missing], batch=self.batch):
                batch = missing[done : done + len(made.rows)]
                kept = []
                for record_id, row in zip(batch, made.rows, strict=True):
                    version, body = held[record_id]
                    if made.space == space:
                        vectors[record_id] = self._made[(space, body.text)] = row
                    new = body.model_copy(update={"embedding": Embedding(model=made.space.model, vector=packed(row))})
                    kept.append((record_id, version, new))
                done += len(batch)
                await keep(kept)
        except MemoryStoreError as error:
            raise MemoryStoreError(
                "unavailable",
                f"{error} {done} of the {len(missing)} records stored without a {space.model} vector were "
                "embedded and kept; the next search goes on from there.",
            ) from None

    def _forget(self, held: Held, space: Space) -> None:
        """Keep the caches to what the live records can use (they would grow with every change)."""
        live = {body.text for _, body in held.values()}
        self._made = {key: vector for key, vector in self._made.items() if key[0] == space and key[1] in live}
        stored = {body.embedding.vector for _, body in held.values() if body.embedding is not None}
        self._stored = {text: vector for text, vector in self._stored.items() if text in stored}

    def _unpacked(self, text: str) -> numpy.ndarray | None:
        if text not in self._stored:
            self._stored[text] = _unit(unpacked(text))
        return self._stored[text]


def _closest(vectors: Mapping[str, numpy.ndarray], target: numpy.ndarray, limit: int) -> list[tuple[str, float]]:
    import numpy

    ids = list(vectors)
    if not ids:
        return []
    scores = numpy.stack([vectors[record_id] for record_id in ids]) @ target
    best = numpy.argsort(-scores, kind="stable")[:limit]
    return [(ids[int(n)], float(scores[n])) for n in best]


def _unit(data: bytes | None) -> numpy.ndarray | None:
    """A stored vector as a unit float32 row, or None when its values are not all finite."""
    if data is None:
        return None
    import numpy

    vector = numpy.frombuffer(data, dtype="<f2").astype(numpy.float32)
    if not bool(numpy.isfinite(vector).all()):
        return None
    norm = float(numpy.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _mapped[**P, T](work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work`, with a failure of the ranking libraries (bm25s, numpy) as `unavailable`, not a raw error."""
    try:
        return work(*args, **kwargs)
    except (MemoryStoreError, ImportError):  # an ImportError is a missing extra, named by `records_extra`
        raise
    except Exception as error:
        logger.exception("ranking records failed")
        raise MemoryStoreError(
            "unavailable", f"Ranking the records failed ({type(error).__name__}: {str(error)[:300]}); try again."
        ) from None
