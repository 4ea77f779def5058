"""The word index's memory per byte of text: BM25 postings (`records.bm25.Postings`) of CJK text
(runs of ideographs, a space one character in ten) and English, as 300 records of 8,000 characters
and as 100,000 records of 10, measured with tracemalloc: what the index holds once built, and the
peak while building it. The bound (`bound`): 8x the text's UTF-8 bytes, and 100 bytes a record,
which tells only for records of a word or two.

Run `python -m benchmarks.word_index` (a few seconds; `make bench` runs it with `benchmarks.recall`);
it publishes its table in docs/performance.md ("Recall"). tests/test_record_index_memory.py holds
every case within the bound.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from typing import Any

from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.bm25 import Postings

from .page import publish

RECORDS, CHARS = 300, 8000
SHORT, SHORT_CHARS = 100_000, 10
BOUND, PER_RECORD = 8, 100  # bytes held, and at a build's peak: 8x the text, and 100 a record


def bound(text: int, records: int) -> int:
    """The most an index of `records` records of `text` UTF-8 bytes holds, or takes to build."""
    return BOUND * text + PER_RECORD * records


def texts(kind: str, chance: random.Random) -> list[str]:
    ideographs = [chr(code) for code in range(0x4E00, 0x4E00 + 3000)]
    words = ["".join(chance.choices("abcdefghijklmnopqrstuvwxyz", k=chance.randint(3, 9))) for _ in range(5000)]
    make: Callable[[], str] = (
        (lambda: "".join(chance.choice(ideographs) if chance.random() > 0.1 else " " for _ in range(CHARS)))
        if kind == "CJK"
        else (lambda: " ".join(chance.choices(words, k=CHARS // 6))[:CHARS])
    )
    return [make() for _ in range(RECORDS)]


def cases() -> dict[str, list[str]]:
    """Each kind of text as long records and as records of a word or two."""
    found = {}
    for kind in ("CJK", "English"):
        made = texts(kind, random.Random(1))
        found[f"{kind}, {RECORDS} records of {CHARS:,} characters"] = made
        pieces = [text[start : start + SHORT_CHARS] for text in made for start in range(0, CHARS, SHORT_CHARS)]
        found[f"{kind}, {SHORT:,} records of {SHORT_CHARS}"] = pieces[:SHORT]
    return found


def measured(made: list[str], analyzer: Analyzer) -> dict[str, int]:
    """The UTF-8 bytes of `made`, and what its postings hold once built and at the peak of the build."""
    tracemalloc.start()
    try:
        postings = Postings.of(made, analyzer)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    text = sum(len(one.encode()) for one in made)
    return {"text": text, "records": len(made), "held": held, "peak": peak, "terms": len(postings.vocabulary)}


def measure() -> dict[str, Any]:
    analyzer = Analyzer.checked("english")
    Postings.of(["warm the stemmer and its cache, which no index owns"], analyzer)
    return {name: measured(made, analyzer) for name, made in cases().items()}


def tables(results: dict[str, Any]) -> str:
    lines = [
        "### The word index's memory (tracemalloc)",
        "",
        "| text | UTF-8 MB | terms | held MB | held / text | peak of the build MB | peak / text | bound MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, found in results.items():
        text, held, peak = found["text"], found["held"], found["peak"]
        lines.append(
            f"| {kind} | {text / 1e6:.2f} | {found['terms']:,} | {held / 1e6:.1f} | {held / text:.1f}x | "
            f"{peak / 1e6:.1f} | {peak / text:.1f}x | {bound(text, found['records']) / 1e6:.1f} |"
        )
    lines += [
        "",
        f"The bound: {BOUND}x the text's UTF-8 bytes and {PER_RECORD} bytes a record (`word_index.bound`).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    results = measure()
    publish(results, saved_as="word_index.json", section="word-index", tables=tables(results))


if __name__ == "__main__":
    main()
