"""The stemming lock: BM25's terms are the stems PyStemmer's Snowball English stemmer makes, and
recall was measured and its fusion chosen on them (docs/performance.md, "Recall"). A release of
PyStemmer (or a change of the stopwords) that makes other terms changes every ranking, so it must
fail here and be taken on purpose: re-measure with `make bench`, then write the golden file again
with `python -m tests.test_recall_stems`.

`tests/golden/stems-english.txt` holds each distinct word of the project's labelled sets
(benchmarks/recall_set.json and benchmarks/conversations.json) and its term ("-": a stopword),
written with PyStemmer 3.1.0.

And the other lock the issue named: stemming took one process-wide lock, so one store's search
waited on another's index build; each thread now stems with a stemmer of its own."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bucket_memory.records import analyzer
from bucket_memory.records.analyzer import WORD, Analyzer

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "stems-english.txt"
SETS = HERE.parent / "benchmarks"


def words() -> list[str]:
    texts = list(json.loads((SETS / "recall_set.json").read_text())["records"].values())
    texts += [record["text"] for record in json.loads((SETS / "conversations.json").read_text())["records"]]
    return sorted({word for text in texts for word in WORD.findall(text.lower())})


def lines() -> list[str]:
    found = words()
    terms = Analyzer("english").terms(found)
    return [f"{word} {'-' if term is None else term}" for word, term in zip(found, terms, strict=True)]


def test_the_english_terms_are_the_ones_recall_was_measured_on() -> None:
    expected = GOLDEN.read_text().splitlines()
    changed = sorted(set(lines()) - set(expected))
    assert not changed, f"{len(changed)} words now make other terms (word, term now): {changed[:20]}"
    assert lines() == expected


def test_the_stems_the_fusion_relies_on_by_name() -> None:
    """A few by name, so that a failure reads plainly: Snowball's English (Porter2) stems, not Porter's."""
    english = Analyzer("english")
    assert english.terms(["running", "generously", "skies", "dying", "volunteered", "deploys", "the"]) == [
        "run",
        "generous",
        "sky",
        "die",
        "volunt",
        "deploy",
        None,
    ]
    assert Analyzer("french").terms(["continuellement", "nationales"]) == ["continuel", "national"]
    assert Analyzer(None).terms(["running", "the"]) == ["running", "the"], "no language: words as written"


if __name__ == "__main__":
    GOLDEN.write_text("\n".join(lines()) + "\n")


def test_stemming_in_one_thread_never_waits_for_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """One process-wide lock around the stemmer made every search's stemming wait while any store
    built its index in a worker thread; each thread now has its own stemmer."""
    inside, release = threading.Event(), threading.Event()
    made = analyzer._stemmer

    class Held:
        def stemWords(self, words: list[str]) -> list[str]:  # PyStemmer's name
            inside.set()
            release.wait(30)
            return words

    monkeypatch.setattr(analyzer, "_stemmer", lambda language: Held() if _held() else made(language))
    held = threading.Thread(target=Analyzer("english").terms, args=(["running"],), name="held")
    held.start()
    try:
        assert inside.wait(30), "the held thread reached its stemmer"
        with ThreadPoolExecutor(1) as other:
            asked = other.submit(Analyzer("english").terms, ["running"])
            assert asked.result(timeout=10) == ["run"], "another thread stems while the first is inside its stemmer"
    finally:
        release.set()
        held.join()


def _held() -> bool:
    return threading.current_thread().name == "held"
