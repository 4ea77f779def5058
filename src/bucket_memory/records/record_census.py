"""Which embedding spaces have vectors of a record memory's records, and which texts each failed on:
what `records doctor` reports, so that a failed text is named once, with why, not met on every search."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from .record_index import Snapshot


@dataclass(frozen=True, slots=True)
class ModelVectors:
    """One space's share of the records (its model, and its dimensions: None for marks written
    before marks named them): how many hold its vector, and the ids of those whose text it failed
    on, with what it raised (searched by words alone until the text changes)."""

    model: str
    dimensions: int | None
    vectors: int
    refused: tuple[str, ...]
    reasons: tuple[str, ...]  # one a refused record, in the same order


@dataclass(frozen=True, slots=True)
class VectorCensus:
    """The live records, how many hold no vector of any space, and each space's share, by model name
    and size."""

    records: int
    without: int
    models: tuple[ModelVectors, ...]


def census(snapshot: Snapshot) -> VectorCensus:
    """The vectors of the records of `snapshot` (marks read as stored: a vector is counted by its
    space, its model's name and its length, whether or not its values decode)."""
    vectors: Counter[tuple[str, int | None]] = Counter()
    refused: defaultdict[tuple[str, int | None], list[tuple[str, str]]] = defaultdict(list)
    records = without = 0
    for found, _, body in snapshot.records():
        records += 1
        without += not body.embeddings
        for stored in body.embeddings:
            if stored.refused:
                refused[stored.model, stored.size].append((found, stored.reason))
            else:
                vectors[stored.model, stored.size] += 1
    spaces = sorted({*vectors, *refused}, key=lambda space: (space[0], space[1] or 0))
    return VectorCensus(records, without, tuple(_share(space, vectors[space], refused[space]) for space in spaces))


def _share(space: tuple[str, int | None], vectors: int, refused: list[tuple[str, str]]) -> ModelVectors:
    failed = sorted(refused)
    return ModelVectors(
        space[0], space[1], vectors, tuple(found for found, _ in failed), tuple(reason for _, reason in failed)
    )
