"""Ranking records against a query: cosine similarity of an embedder's vectors, or BM25 over the texts.

Vectors are only compared within one vector space: the same embedding model (as its provider
names it) and the same number of dimensions. A record whose stored vector is of another space,
or that has none, is embedded again on demand and kept in this process, never mixed in.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from a13n_harness.providers.memory import MemoryStoreError

if TYPE_CHECKING:
    import numpy
    from pydantic_ai import Embedder

    from .records import Embedding, RecordBody

logger = logging.getLogger(__name__)


class Ranking:
    """What ranking keeps between searches of one store: the BM25 index of the texts last ranked,
    and the vectors made on demand for records stored without one of the embedder's space."""

    def __init__(self) -> None:
        self._index: tuple[tuple[tuple[str, str], ...], Any] | None = None  # ((id, text), ...), bm25s.BM25
        self._made: dict[tuple[str, str], numpy.ndarray] = {}  # (space, text) -> unit vector
        self._stored: dict[str, numpy.ndarray | None] = {}  # a stored vector's text -> its unit vector

    async def embed_document(self, embedder: Embedder, text: str) -> Embedding:
        from .records import Embedding

        space, (vector,) = await _embedded(embedder, [text], "document")
        return Embedding(model=space, vector=_packed(vector))

    async def rank(
        self, query: str, bodies: Mapping[str, RecordBody], limit: int, embedder: Embedder | None
    ) -> list[tuple[str, float]]:
        """The ids of the `limit` records closest to `query`, best first, with their scores."""
        if limit <= 0 or not bodies or not query.strip():
            return []
        if embedder is None:
            return await asyncio.to_thread(self._lexical, query, bodies, limit)
        return await self._by_meaning(query, bodies, limit, embedder)

    def _lexical(self, query: str, bodies: Mapping[str, RecordBody], limit: int) -> list[tuple[str, float]]:
        import bm25s

        corpus = tuple(sorted((record_id, body.text) for record_id, body in bodies.items()))
        if self._index is None or self._index[0] != corpus:
            index = bm25s.BM25()
            tokens = bm25s.tokenize([text for _, text in corpus], stopwords="en", show_progress=False)
            index.index(tokens, show_progress=False)
            self._index = (corpus, index)
        query_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not query_tokens.vocab:
            return []
        found, scores = self._index[1].retrieve(query_tokens, k=min(limit, len(corpus)), show_progress=False)
        return [(corpus[int(n)][0], float(score)) for n, score in zip(found[0], scores[0], strict=True) if score > 0]

    async def _by_meaning(
        self, query: str, bodies: Mapping[str, RecordBody], limit: int, embedder: Embedder
    ) -> list[tuple[str, float]]:
        import numpy

        space, (wanted,) = await _embedded(embedder, [query], "query")
        vectors: dict[str, numpy.ndarray] = {}
        missing: list[str] = []
        for record_id, body in bodies.items():
            stored = body.embedding
            vector = self._unpacked(stored.vector) if stored is not None and stored.model == space else None
            if vector is not None and len(vector) == len(wanted):
                vectors[record_id] = vector
            elif (made := self._made.get((space, body.text))) is not None:
                vectors[record_id] = made
            else:
                missing.append(record_id)
        if missing:
            # Stored by another embedding model (or none): embedded again here, never compared across spaces.
            logger.info("embedding %d records stored without a %s vector", len(missing), space)
            _, made_now = await _embedded(embedder, [bodies[i].text for i in missing], "document")
            for record_id, vector in zip(missing, made_now, strict=True):
                self._made[(space, bodies[record_id].text)] = vectors[record_id] = _unit(vector)
        ids = [record_id for record_id in vectors if len(vectors[record_id]) == len(wanted)]
        if not ids:
            return []
        self._stored = {
            body.embedding.vector: self._stored.get(body.embedding.vector)
            for body in bodies.values()
            if body.embedding is not None and body.embedding.vector in self._stored
        }  # only the live records' vectors stay cached
        matrix = numpy.stack([vectors[record_id] for record_id in ids])
        scores = matrix @ _unit(wanted)
        best = numpy.argsort(-scores, kind="stable")[:limit]
        return [(ids[int(n)], float(scores[n])) for n in best]

    def _unpacked(self, text: str) -> numpy.ndarray | None:
        if text not in self._stored:
            self._stored[text] = _unpacked(text)
        return self._stored[text]


async def _embedded(embedder: Embedder, texts: Sequence[str], kind: str) -> tuple[str, list[numpy.ndarray]]:
    """The vector space ("provider:model") and a unit vector per text, or `unavailable`."""
    import numpy

    try:
        if kind == "query":
            result = await embedder.embed_query(list(texts))
        else:
            result = await embedder.embed_documents(list(texts))
    except Exception as error:  # a provider's own errors: none of them is the caller's to handle
        raise MemoryStoreError(
            "unavailable", f"The embedder failed ({type(error).__name__}: {str(error)[:200]}); try again."
        ) from None
    vectors = [numpy.asarray(vector, dtype=numpy.float32) for vector in result.embeddings]
    if len(vectors) != len(texts) or any(vector.ndim != 1 or not len(vector) for vector in vectors):
        raise MemoryStoreError("unavailable", "The embedder returned no usable vector; check its model.")
    return f"{result.provider_name}:{result.model_name}", [_unit(vector) for vector in vectors]


def _unit(vector: numpy.ndarray) -> numpy.ndarray:
    import numpy

    norm = float(numpy.linalg.norm(vector))
    return vector / norm if norm > 0 and numpy.isfinite(norm) else numpy.zeros_like(vector)


def _packed(vector: numpy.ndarray) -> str:
    return base64.b64encode(vector.astype("<f2").tobytes()).decode()


def _unpacked(text: str) -> numpy.ndarray | None:
    """A stored vector, or None when it is not one (the bytes are hostile: any length, any value)."""
    import numpy

    try:
        data = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    if not data or len(data) % 2:
        return None
    vector = numpy.frombuffer(data, dtype="<f2").astype(numpy.float32)
    return _unit(vector) if bool(numpy.isfinite(vector).all()) else None
