"""The word index's memory is bounded by its text: BM25 postings of CJK and English records hold at
most 8x the text's UTF-8 bytes once built and at the peak of building them (measured with
tracemalloc, not timed). A build held every token of every text as a Python string at once: 24x
English text and 14x CJK at its peak (docs/performance.md, "Recall")."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from benchmarks.word_index import texts

from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.bm25 import Postings

BOUND = 8  # times the text's bytes, held and at the peak of a build (docs/performance.md, "Recall")


@pytest.mark.parametrize("kind", ["CJK", "English"])
def test_the_word_index_holds_and_builds_within_8x_its_text(kind: str) -> None:
    analyzer = Analyzer("english")
    made = texts(kind, random.Random(1))
    size = sum(len(text.encode()) for text in made)
    Postings.of(made[:5], analyzer)  # the process's stemmer and its cache, which no index owns
    tracemalloc.start()
    try:
        postings = Postings.of(made, analyzer)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(postings.lengths) == len(made) and len(postings.vocabulary) > 1000
    assert held <= BOUND * size, f"{kind}: the index holds {held / size:.1f}x its text"
    assert peak <= BOUND * size, f"{kind}: building the index took {peak / size:.1f}x its text at its peak"
