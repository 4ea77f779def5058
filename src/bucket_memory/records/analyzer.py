"""How record texts become BM25's terms: words, less stopwords, stemmed by a Snowball stemmer.

Tokens are runs of two or more word characters, lower-cased (bm25s's pattern). With a language
(English by default) each word is reduced to its Snowball stem through PyStemmer, so "supported
the group" meets "support group"; English also drops bm25s's 33 stopwords, as its docs
recommend. An analyzer is part of what postings are built with (`bm25.Postings.analyzer`): a
store whose analyzer differs builds its own, never mixing terms of two.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from Stemmer import Stemmer

# bm25s's r"(?u)\b\w\w+\b": a greedy run of word characters is bounded by word boundaries anyway.
WORD = re.compile(r"\w\w+")
# bm25s's STOPWORDS_EN (MIT), which its `stopwords="en"` removes.
ENGLISH_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
DEFAULT_LANGUAGE = "english"


@dataclass(frozen=True, slots=True)
class Analyzer:
    """The terms of a text for one language (a Snowball stemmer's name, as PyStemmer lists them), or
    of no language (words as they are: no stems, no stopwords). Equal analyzers make equal terms."""

    language: str | None = DEFAULT_LANGUAGE

    @classmethod
    def checked(cls, language: object) -> Analyzer:
        """The analyzer for `language`, or a ValueError naming the languages there are."""
        if language is None:
            return cls(None)
        try:
            known = languages()
        except ImportError:  # the records extra is missing: the first search names it
            known = [DEFAULT_LANGUAGE]
        if not isinstance(language, str) or language not in known:
            shown = repr(language)[:60]
            raise ValueError(f"language must be None or one of {', '.join(known)}; not {shown}")
        return cls(language)

    @property
    def stopwords(self) -> frozenset[str]:
        return ENGLISH_STOPWORDS if self.language == "english" else frozenset()

    def terms(self, words: Sequence[str]) -> list[str | None]:
        """Each (lower-cased) word's term, None for a stopword."""
        stops = self.stopwords
        if self.language is None:
            return [None if word in stops else word for word in words]
        stems = _stem(self.language, [word for word in words if word not in stops])
        found = iter(stems)
        return [None if word in stops else next(found) for word in words]

    def query_terms(self, query: str) -> Counter[str]:
        """The query's terms, each as often as it occurs (a repeated word counts again)."""
        return Counter(term for term in self.terms(WORD.findall(query.lower())) if term is not None)


def languages() -> list[str]:
    """The languages an analyzer can stem, as PyStemmer names them."""
    import Stemmer

    return sorted(Stemmer.algorithms())


_PER_THREAD = threading.local()


def _stem(language: str, words: list[str]) -> list[str]:
    # A PyStemmer stemmer keeps a cache and is not safe for two threads at once; indexing runs in
    # worker threads beside queries on the loop. Each thread has its own, so one store's stemming
    # never waits on another's (one process-wide lock made every search wait on any build).
    stemmers: dict[str, Stemmer] = _PER_THREAD.__dict__.setdefault("stemmers", {})
    stemmer = stemmers.get(language)
    if stemmer is None:
        stemmer = stemmers[language] = _stemmer(language)
    return list(stemmer.stemWords(words))


def _stemmer(language: str) -> Stemmer:
    import Stemmer

    return Stemmer.Stemmer(language)
