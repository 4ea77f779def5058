"""Which embedding models have vectors of a record memory's records, and which texts each refused:
what `records doctor` reports, so that a refused text is named once, not met on every search."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from .record_index import Snapshot


@dataclass(frozen=True, slots=True)
class ModelVectors:
    """One model's share of the records: how many hold its vector, and the ids of those whose text
    it refused (searched by words alone until the text changes)."""

    model: str
    vectors: int
    refused: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VectorCensus:
    """The live records, how many hold no vector of any model, and each model's share, by model name."""

    records: int
    without: int
    models: tuple[ModelVectors, ...]


def census(snapshot: Snapshot) -> VectorCensus:
    """The vectors of the records of `snapshot` (marks read as stored: a vector is counted by its
    model's name, whether or not its values decode)."""
    vectors: Counter[str] = Counter()
    refused: defaultdict[str, list[str]] = defaultdict(list)
    records = without = 0
    for found, _, body in snapshot.records():
        records += 1
        without += not body.embeddings
        for stored in body.embeddings:
            if stored.refused:
                refused[stored.model].append(found)
            else:
                vectors[stored.model] += 1
    models = sorted({*vectors, *refused})
    shares = (ModelVectors(model, vectors[model], tuple(sorted(refused[model]))) for model in models)
    return VectorCensus(records, without, tuple(shares))
