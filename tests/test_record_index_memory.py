"""The word index's memory is bounded by its text: BM25 postings of CJK and English records, long and
of a word or two, hold at most 8x the text's UTF-8 bytes and 100 bytes a record once built and at
the peak of building them (`benchmarks.word_index.bound`; measured with tracemalloc, not timed). A
build held every token of every text as a Python string at once: 24x English text and 14x CJK at
its peak (docs/performance.md, "Recall")."""

from __future__ import annotations

import pytest
from benchmarks.word_index import bound, cases, measured

from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.bm25 import Postings

CASES = cases()


@pytest.mark.parametrize("case", list(CASES))
def test_the_word_index_holds_and_builds_within_its_bound(case: str) -> None:
    analyzer = Analyzer("english")
    Postings.of(CASES[case][:5], analyzer)  # the process's stemmer and its cache, which no index owns
    found = measured(CASES[case], analyzer)
    most = bound(found["text"], found["records"])
    assert found["terms"] > 1000
    assert found["held"] <= most, f"{case}: the index holds {found['held'] / found['text']:.1f}x its text"
    assert found["peak"] <= most, f"{case}: its build took {found['peak'] / found['text']:.1f}x its text at the peak"
