"""The word index's memory per byte of text: BM25 postings (`records.bm25.Postings`) of 300 records
of 8,000 characters, CJK (runs of ideographs, a space one character in ten) and English, measured
with tracemalloc: what the index holds once built, and the peak while building it.

Run `python -m benchmarks.word_index` (a few seconds); docs/performance.md ("Recall") quotes it.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable

from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.bm25 import Postings

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


def main() -> None:
    analyzer = Analyzer.checked("english")
    assert analyzer is not None
    for kind in ("CJK", "English"):
        made = texts(kind, random.Random(1))
        size = sum(len(text.encode()) for text in made)
        tracemalloc.start()
        postings = Postings.of(made, analyzer)
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"{kind}: {size / 1e6:.2f} MB of text; the index holds {held / 1e6:.2f} MB ({held / size:.1f}x), "
            f"{peak / 1e6:.2f} MB at the peak of building it ({peak / size:.1f}x); {len(postings.vocabulary)} terms"
        )


if __name__ == "__main__":
    main()
