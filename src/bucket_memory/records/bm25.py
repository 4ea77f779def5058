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

        # Every token of every text at once, numbered by C loops (dict.fromkeys, map): a Python
        # loop per token cost three times as much at a cold start. Each distinct word is analyzed
        # once, into its term's number (-1 for a stopword).
        found = [WORD.findall(text.lower()) for text in texts]
        tokens = list(chain.from_iterable(found))
        distinct = list(dict.fromkeys(tokens))
        numbers = {word: number for number, word in enumerate(distinct)}
        ids = numpy.fromiter(map(numbers.__getitem__, tokens), dtype=numpy.int64, count=len(tokens))
        owners = numpy.repeat(numpy.arange(len(texts), dtype=numpy.int64), [len(words) for words in found])
        vocabulary: dict[str, int] = {}
        term_of = numpy.fromiter(
            (-1 if term is None else vocabulary.setdefault(term, len(vocabulary)) for term in analyzer.terms(distinct)),
            dtype=numpy.int64,
            count=len(distinct),
        )
        terms = term_of[ids]
        kept = terms >= 0
        return cls._built(analyzer, vocabulary, owners[kept], terms[kept], None, len(texts))

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
            renumbered = numpy.zeros(len(names), dtype=numpy.int64)
            renumbered[used] = [vocabulary.setdefault(names[term], len(vocabulary)) for term in used.tolist()]
            owners.append(base + numpy.repeat(numpy.arange(len(kept), dtype=numpy.int64), per_slot))
            terms.append(renumbered[part.slot_terms[entries]])
            counts.append(part.slot_counts[entries])
            base += len(kept)
        joined = numpy.concatenate(counts) if counts else numpy.zeros(0, dtype=numpy.float32)
        empty = numpy.zeros(0, dtype=numpy.int64)
        return cls._built(
            analyzer,
            vocabulary,
            numpy.concatenate(owners) if owners else empty,
            numpy.concatenate(terms) if terms else empty,
            joined,
            base,
        )

    @classmethod
    def _built(
        cls,
        analyzer: Analyzer,
        vocabulary: dict[str, int],
        owners: numpy.ndarray,
        terms: numpy.ndarray,
        counts: numpy.ndarray | None,
        size: int,
    ) -> Postings:
        """Postings from (slot, word) pairs: one pair per token (`counts` None) or per distinct word of a slot."""
        import numpy

        keys = owners * max(len(vocabulary), 1) + terms
        if counts is None:
            keys, tallies = numpy.unique(keys, return_counts=True)
            weights = tallies.astype(numpy.float32)
        else:
            order = numpy.argsort(keys, kind="stable")
            keys, weights = keys[order], counts[order].astype(numpy.float32)
        slot_of, term_of = numpy.divmod(keys, max(len(vocabulary), 1))
        by_term = numpy.argsort(term_of, kind="stable")
        return cls(
            analyzer=analyzer,
            vocabulary=vocabulary,
            term_starts=_starts(term_of, len(vocabulary)),
            slots=slot_of[by_term].astype(numpy.int32),
            counts=weights[by_term],
            slot_starts=_starts(slot_of, size),
            slot_terms=term_of.astype(numpy.int32),
            slot_counts=weights,
            lengths=numpy.bincount(slot_of, weights=weights, minlength=size).astype(numpy.float32),
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
