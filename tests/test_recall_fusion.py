"""Hybrid's fusion follows the query: BM25's share is how much of the query the best record holds in
words (its score over the query's ceiling), so a paraphrase is ranked by meaning and a query a
record holds word for word by words, whatever the set. Fixed shares chosen on some sets fell below
BM25 alone on a set of another kind (docs/performance.md, "Recall")."""

from __future__ import annotations

import math

import numpy
import pytest

from bucket_memory.records import bm25
from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.recall import FUSION, convex

ANALYZER = Analyzer("english")
# Twenty records alike, then three that questions below are about.
TEXTS = [f"the team met on day {n} about release {n}" for n in range(20)] + [
    "Everyone on the team drinks green tea at the standup",
    "Our crew is fond of a hot cup of oolong every morning",
    "Rotate the signing key of the payments service every ninety days",
]
HOLDS_TEAM, OOLONG, SIGNING_KEY = 20, 21, 22


def scored(query: str, texts: list[str] = TEXTS) -> bm25.Scored:
    postings = bm25.Postings.of(texts, ANALYZER)
    corpus = bm25.Corpus(len(texts), float(postings.lengths.sum()))
    return bm25.scored(ANALYZER.query_terms(query), [(postings, numpy.ones(len(texts), dtype=bool))], corpus)


def hybrid_first(query: str, cosines: numpy.ndarray) -> int:
    found = scored(query)
    (fused,) = convex(found.scores, [cosines], found.ceiling)
    return int(numpy.argmax(fused))


def test_the_ceiling_is_the_score_of_a_record_of_the_average_length_holding_each_word_once() -> None:
    texts = ["alpha beta gamma delta", "beta gamma delta epsilon", "gamma delta epsilon zeta"]
    found = scored("alpha beta", texts)
    assert math.isclose(found.ceiling, float(found.scores[0][0]), rel_tol=1e-5), "all alike long: the first is it"
    unknown = scored("alpha beta omega", texts)
    omega = math.log(1 + (3 + 0.5) / 0.5) / (1 + bm25.K1)  # a word no record holds, at its highest idf
    assert math.isclose(unknown.ceiling, found.ceiling + omega, rel_tol=1e-5)
    assert [list(scores) for scores in unknown.scores] == [list(scores) for scores in found.scores]
    assert scored("the of", texts).ceiling == 0, "stopwords only: nothing to hold"


def test_a_paraphrase_is_ranked_by_meaning_though_a_record_shares_its_common_words() -> None:
    """The question's key words (beverage, prefer) are in no record; one record shares 'everyone'
    and 'team'. With BM25's fixed share of 0.75 that record came first, above the record the
    vectors clearly put first."""
    cosines = numpy.random.default_rng(1).uniform(0.2, 0.4, len(TEXTS)).astype(numpy.float32)
    cosines[OOLONG], cosines[HOLDS_TEAM] = 0.62, 0.45
    query = "what beverage does everyone on the team prefer"
    found = scored(query)
    assert int(numpy.argmax(found.scores[0])) == HOLDS_TEAM
    assert FUSION.share(float(found.scores[0].max()) / found.ceiling) < 0.5
    assert hybrid_first(query, cosines) == OOLONG


@pytest.mark.parametrize("seed", range(5))
def test_a_query_a_record_holds_word_for_word_is_answered_by_words_whatever_the_vectors_say(seed: int) -> None:
    cosines = numpy.random.default_rng(seed).uniform(0.3, 0.5, len(TEXTS)).astype(numpy.float32)
    cosines[:5], cosines[SIGNING_KEY] = 0.75, 0.3  # five records the vectors prefer, the answer below most
    query = "how often is the payments signing key rotated"
    found = scored(query)
    assert FUSION.share(float(found.scores[0].max()) / found.ceiling) > 0.75
    assert hybrid_first(query, cosines) == SIGNING_KEY


def test_bm25_s_share_rises_with_coverage_from_none_to_nearly_all() -> None:
    shares = [FUSION.share(coverage) for coverage in (0.0, 0.05, FUSION.midpoint, 0.5, 1.0, 2.0)]
    assert shares[0] == 0 and shares[2] == 0.5 and shares[-1] > 0.9
    assert shares == sorted(shares)
