"""BM25 over record texts, in postings built once per group of records and scored at query time.

The scores are bm25s's defaults exactly (its "lucene" variant: k1 = 1.5, b = 0.75, idf =
ln(1 + (N - df + 0.5) / (df + 0.5)); terms as `analyzer.Analyzer` makes them, as bm25s's with
its English stopwords and a Snowball stemmer; a word repeated in the query counts again), but nothing depends on the
whole corpus until a query: N, the document frequencies and the average length are summed then,
over the records still live. So adding a record costs its own words, where bm25s, which folds
them into every stored score, has to index every record again.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from .analyzer import WORD, Analyzer

if TYPE_CHECKING:
    import numpy

K1, B = 1.5, 0.75
# Characters of text tokenized at a time while building postings: a token is a Python string many
# times the size of its word, so the tokens of all the texts at once held many times the text at
# the peak of a build; one chunk's are all a build holds now (docs/performance.md, "Recall").
CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Postings:
    """The terms of one group of records (slots 0 to n - 1) as `analyzer` makes them, never changed
    once built: for each term (`vocabulary` gives its number) the slots that hold it and how often,
    and for each slot its terms (to merge groups) and its length in terms."""

    analyzer: Analyzer
    vocabulary: dict[str, int]
    term_starts: numpy.ndarray  # int64, one more than the words: word t's postings are [start[t], start[t + 1])
    slots: numpy.ndarray  # int32, the postings' slots, by word
    counts: numpy.ndarray  # float32, how often the word is in that slot
    slot_starts: numpy.ndarray  # int64, one more than the slots: slot s's words are [start[s], start[s + 1])
    slot_terms: numpy.ndarray  # int32, each slot's words, by slot
    slot_counts: numpy.ndarray  # float32
    lengths: numpy.ndarray  # float32, each slot's length in words

    @classmethod
    def of(cls, texts: Sequence[str], analyzer: Analyzer) -> Postings:
        """The postings of these texts, slot n holding texts[n]."""
        import numpy

        # Texts are tokenized a chunk at a time, each token numbered by C loops (dict.fromkeys,
        # map; a Python loop per token cost three times as much at a cold start) and counted per
        # slot, so what a build holds is the chunk's tokens and a (slot, term, count) per distinct
        # word of a text. Each distinct word is analyzed once, into its term's number (-1 for a
        # stopword); a term spelt as its word keeps the word's string (one string, not two).
        numbers: dict[str, int] = {}
        vocabulary: dict[str, int] = {}
        slots, terms, counts = [], [], []
        for start, end in _chunks(texts):
            found = [WORD.findall(text.lower()) for text in texts[start:end]]
            new = [word for word in dict.fromkeys(chain.from_iterable(found)) if word not in numbers]
            for word, term in zip(new, analyzer.terms(new), strict=True):
                kept = word if term == word else term
                numbers[word] = -1 if kept is None else vocabulary.setdefault(kept, len(vocabulary))
            sizes = [len(words) for words in found]
            ids = numpy.fromiter(map(numbers.__getitem__, chain.from_iterable(found)), numpy.int64, sum(sizes))
            del found
            owners = numpy.repeat(numpy.arange(start, end, dtype=numpy.int64), sizes)
            keys, tallies = numpy.unique((owners << 32 | ids)[ids >= 0], return_counts=True)  # by slot, then term
            slots.append((keys >> 32).astype(numpy.int32))
            terms.append((keys & 0xFFFFFFFF).astype(numpy.int32))
            counts.append(tallies.astype(numpy.float32))
        del numbers
        joined = _joined(slots, numpy.int32), _joined(terms, numpy.int32), _joined(counts, numpy.float32)
        return cls._built(analyzer, vocabulary, *joined, len(texts))

    @classmethod
    def merged(cls, parts: Sequence[tuple[Postings, numpy.ndarray]], analyzer: Analyzer) -> Postings:
        """One group of the slots each part keeps (a bool mask per part), in order; every part's
        terms are `analyzer`'s."""
        import numpy

        assert all(part.analyzer == analyzer for part, _ in parts), "terms of two analyzers are never mixed"
        vocabulary: dict[str, int] = {}
        owners, terms, counts = [], [], []
        base = 0
        for part, keep in parts:
            kept = numpy.flatnonzero(keep)
            per_slot = numpy.diff(part.slot_starts)[kept]
            entries = _ranges(part.slot_starts[kept], per_slot)
            names = list(part.vocabulary)  # in number order: numbers are given in insertion order
            used = numpy.unique(part.slot_terms[entries])
            renumbered = numpy.zeros(len(names), dtype=numpy.int32)
            renumbered[used] = [vocabulary.setdefault(names[term], len(vocabulary)) for term in used.tolist()]
            owners.append(
                (base + numpy.repeat(numpy.arange(len(kept), dtype=numpy.int64), per_slot)).astype(numpy.int32)
            )
            terms.append(renumbered[part.slot_terms[entries]])
            counts.append(part.slot_counts[entries])
            base += len(kept)
        return cls._built(
            analyzer,
            vocabulary,
            _joined(owners, numpy.int32),
            _joined(terms, numpy.int32),
            _joined(counts, numpy.float32),
            base,
        )

    @classmethod
    def _built(
        cls,
        analyzer: Analyzer,
        vocabulary: dict[str, int],
        slots: numpy.ndarray,
        terms: numpy.ndarray,
        counts: numpy.ndarray,
        size: int,
    ) -> Postings:
        """Postings from (slot, term, count) entries, one per distinct term of a slot, by slot."""
        import numpy

        # What counts over every entry first (bincount's int64 and float64 copies), then the sort:
        # their copies and the sort's never held at once.
        term_starts, slot_starts = _starts(terms, len(vocabulary)), _starts(slots, size)
        lengths = numpy.bincount(slots, weights=counts, minlength=size).astype(numpy.float32)
        by_term = numpy.argsort(terms, kind="stable")  # each term's slots stay in order
        return cls(
            analyzer=analyzer,
            vocabulary=vocabulary,
            term_starts=term_starts,
            slots=slots[by_term],
            counts=counts[by_term],
            slot_starts=slot_starts,
            slot_terms=terms,
            slot_counts=counts,
            lengths=lengths,
        )


@dataclass(frozen=True, slots=True)
class Corpus:
    """What BM25 needs of all the live records at once: how many, and their total length in words."""

    records: int
    words: float


@dataclass(frozen=True, slots=True)
class Scored:
    """A query's BM25 scores (`scores`), and its `ceiling`: what a record of the average length
    holding each of its words once would score, a word no record holds counting at its highest
    idf. The best score over the ceiling is how much of the query the best record matches, on
    the same scale for any query and corpus (hybrid weighs BM25 by it: `recall.Fusion`)."""

    scores: list[numpy.ndarray]
    ceiling: float


def scores(
    terms: Counter[str], groups: Sequence[tuple[Postings, numpy.ndarray]], corpus: Corpus
) -> list[numpy.ndarray]:
    """Each live slot's BM25 score for the query, per group (a bool mask of live slots per group); 0
    where no word matches and for slots not live."""
    return scored(terms, groups, corpus).scores


def scored(terms: Counter[str], groups: Sequence[tuple[Postings, numpy.ndarray]], corpus: Corpus) -> Scored:
    """`scores`, and the query's ceiling (`Scored`)."""
    import numpy

    found = [numpy.zeros(len(live), dtype=numpy.float32) for _, live in groups]
    if corpus.records == 0 or not terms:
        return Scored(found, 0.0)
    average = corpus.words / corpus.records or 1.0
    ceiling = 0.0
    for word, repeats in terms.items():
        hits: list[tuple[numpy.ndarray, numpy.ndarray] | None] = []
        for postings, live in groups:
            term = postings.vocabulary.get(word)
            if term is None:
                hits.append(None)
                continue
            start, end = postings.term_starts[term], postings.term_starts[term + 1]
            slots = postings.slots[start:end]
            keep = live[slots]
            hits.append((slots[keep], postings.counts[start:end][keep]))
        frequency = sum(len(hit[0]) for hit in hits if hit is not None)
        weight = repeats * math.log(1 + (corpus.records - frequency + 0.5) / (frequency + 0.5))
        ceiling += weight / (1 + K1)  # tf 1 at the average length: tf / (tf + K1)
        if not frequency:
            continue
        for (postings, _), hit, into in zip(groups, hits, found, strict=True):
            if hit is not None:
                slots, tf = hit
                norm = K1 * ((1 - B) + B * postings.lengths[slots] / average)
                into[slots] += weight * tf / (tf + norm)
    return Scored(found, ceiling)


def _chunks(texts: Sequence[str]) -> list[tuple[int, int]]:
    """The texts in runs of about `CHUNK` characters (at least one text a run), as (start, end)."""
    runs, start, size = [], 0, 0
    for end, text in enumerate(texts, 1):
        size += len(text)
        if size >= CHUNK:
            runs.append((start, end))
            start, size = end, 0
    return [*runs, (start, len(texts))] if start < len(texts) else runs


def _joined(parts: list[numpy.ndarray], dtype: type) -> numpy.ndarray:
    """`parts` as one array, emptying the list: its parts are let go as soon as they are copied, so
    a build holds one copy of its entries, not two."""
    import numpy

    joined = numpy.concatenate(parts) if parts else numpy.zeros(0, dtype=dtype)
    parts.clear()
    return joined


def _starts(owners: numpy.ndarray, size: int) -> numpy.ndarray:
    """Where each of `size` owners' entries start in an array sorted by owner, and the end."""
    import numpy

    starts = numpy.zeros(size + 1, dtype=numpy.int64)
    numpy.cumsum(numpy.bincount(owners, minlength=size), out=starts[1:])
    return starts


def _ranges(starts: numpy.ndarray, lengths: numpy.ndarray) -> numpy.ndarray:
    """The indices [starts[i], starts[i] + lengths[i]) for every i, concatenated."""
    import numpy

    total = int(lengths.sum())
    if total == 0:
        return numpy.zeros(0, dtype=numpy.int64)
    offsets = numpy.repeat(starts - numpy.cumsum(lengths) + lengths, lengths)
    return offsets + numpy.arange(total, dtype=numpy.int64)
