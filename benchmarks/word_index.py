"""The word index's memory per byte of text: BM25 postings (`records.bm25.Postings`) of 300 records
of 8,000 characters, CJK (runs of ideographs, a space one character in ten) and English, measured
with tracemalloc: what the index holds once built, and the peak while building it.

Run `python -m benchmarks.word_index` (a few seconds; `make bench` runs it with `benchmarks.recall`);
it publishes its table in docs/performance.md ("Recall"). tests/test_record_index_memory.py holds
both within 8x the text.
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


def texts(kind: str, chance: random.Random) -> list[str]:
    ideographs = [chr(code) for code in range(0x4E00, 0x4E00 + 3000)]
    words = ["".join(chance.choices("abcdefghijklmnopqrstuvwxyz", k=chance.randint(3, 9))) for _ in range(5000)]
    make: Callable[[], str] = (
        (lambda: "".join(chance.choice(ideographs) if chance.random() > 0.1 else " " for _ in range(CHARS)))
        if kind == "CJK"
        else (lambda: " ".join(chance.choices(words, k=CHARS // 6))[:CHARS])
    )
    return [make() for _ in range(RECORDS)]


def measure() -> dict[str, Any]:
    analyzer = Analyzer.checked("english")
    Postings.of(["warm the stemmer and its cache, which no index owns"], analyzer)
    results: dict[str, Any] = {}
    for kind in ("CJK", "English"):
        made = texts(kind, random.Random(1))
        tracemalloc.start()
        postings = Postings.of(made, analyzer)
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = sum(len(text.encode()) for text in made)
        results[kind] = {"text": size, "held": held, "peak": peak, "terms": len(postings.vocabulary)}
    return results


def tables(results: dict[str, Any]) -> str:
    lines = [
        f"### The word index's memory: {RECORDS} records of {CHARS:,} characters (tracemalloc)",
        "",
        "| text | UTF-8 MB | terms | held MB | held / text | peak of the build MB | peak / text |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, found in results.items():
        text, held, peak = found["text"], found["held"], found["peak"]
        lines.append(
            f"| {kind} | {text / 1e6:.2f} | {found['terms']:,} | {held / 1e6:.1f} | {held / text:.1f}x | "
            f"{peak / 1e6:.1f} | {peak / text:.1f}x |"
        )
    return "\n".join([*lines, ""])


def main() -> None:
    results = measure()
    publish(results, saved_as="word_index.json", section="word-index", tables=tables(results))


if __name__ == "__main__":
    main()
