"""Choosing hybrid's fusion on labelled sets of different kinds, and measuring it on a set it was
not chosen on (leave one set out), with the local model (WordLlama, offline).

Three sets (`recall.load_sets`): the project's conversations and team facts, and one made by
others that a package ships in its wheel, the examples of the AWS API models in botocore. Every
ranking is computed over every record from our BM25 (`records.bm25`, as the store counts) and the
model's cosines; a fusion is a function of the two score vectors of a question (and of its BM25
ceiling, `bm25.Scored`), so a curve of weights costs no search. A fusion is chosen on some sets
by the goal itself: the best worst margin, over those sets, above the best of BM25 alone, the
vectors alone and the plain convex fusion. `recall.py` measures the store's own rankings, the
chosen default among them.

Run `python -m benchmarks.fusion`; `make bench` publishes its tables in docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy

from bucket_memory.records import bm25
from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.recall import FUSION, Fusion, fused_scores

from .page import publish
from .recall import Labelled, load_sets

WEIGHTS = tuple(round(0.1 * n, 1) for n in range(11))  # a fixed share of BM25; 1.0 is BM25 alone, 0.0 vectors alone
DEPTHS = (0, 10, 20, 30, 50)
MIDPOINTS = tuple(round(0.05 * n, 2) for n in range(2, 11))  # `recall.Fusion.midpoint`, 0.10 to 0.50


@dataclass(frozen=True, slots=True)
class Scored:
    """A set's questions scored against every record: BM25 and cosine, one row per question, and
    the column of each question's answers."""

    name: str
    words: numpy.ndarray
    ceilings: numpy.ndarray
    cosines: numpy.ndarray
    answers: list[set[int]]


def scored(labelled: Labelled) -> Scored:
    from bucket_memory.records.local_embedding import embedded

    keys = list(labelled.records)
    texts = [labelled.records[key] for key in keys]
    analyzer = Analyzer.checked("english")
    assert analyzer is not None
    postings = bm25.Postings.of(texts, analyzer)
    live = numpy.ones(len(texts), dtype=bool)
    corpus = bm25.Corpus(len(texts), float(postings.lengths.sum()))
    questions = [question for question, _ in labelled.questions]
    matched = [bm25.scored(analyzer.query_terms(q), [(postings, live)], corpus) for q in questions]
    words = numpy.stack([found.scores[0] for found in matched])
    ceilings = numpy.array([found.ceiling for found in matched])
    cosines = _unit(embedded(questions)) @ _unit(embedded(texts)).T
    where = {key: n for n, key in enumerate(keys)}
    answers = [{where[key] for key in wanted} for _, wanted in labelled.questions]
    return Scored(labelled.name, words, ceilings, cosines, answers)


def _unit(rows: numpy.ndarray) -> numpy.ndarray:
    norms = numpy.linalg.norm(rows, axis=1, keepdims=True)
    unit: numpy.ndarray = numpy.divide(rows, norms, out=numpy.zeros_like(rows), where=norms > 0)
    return unit


type Ranker = Callable[[int], numpy.ndarray]  # a question's number -> every record's score


def hits(scores: Ranker, found: Scored, cut: int = 5) -> list[bool]:
    """Per question, whether an answer is among the first `cut` records by `scores(question)` (ties
    broken by record order, as the store breaks them by id)."""
    found_any = []
    for n, wanted in enumerate(found.answers):
        row = scores(n)
        top = numpy.argsort(-row, kind="stable")[:cut]
        found_any.append(bool(wanted & set(top[row[top] > -numpy.inf].tolist())))
    return found_any


def recall_at(scores: Ranker, found: Scored, cut: int = 5) -> float:
    """The share of questions with an answer among the first `cut` records by `scores(question)`."""
    return sum(hits(scores, found, cut)) / len(found.answers)


def fused(fusion: Fusion, found: Scored, share: float | None = None) -> Ranker:
    """`fusion`'s scores, with the query's share of BM25 or a fixed `share`."""
    return lambda n: fused_scores(fusion, found.words[n], found.cosines[n], float(found.ceilings[n]), share)


def fusion_recall(fusion: Fusion, found: Scored, share: float | None = None) -> float:
    return recall_at(fused(fusion, found, share), found)


def plain_convex(found: Scored) -> Ranker:
    """The issue's reference: 0.7 x max-normalized BM25 + 0.3 x min-max cosine, over every record."""

    def score(n: int) -> numpy.ndarray:
        words, near = found.words[n], found.cosines[n]
        best, low, high = words.max(), near.min(), near.max()
        scaled = (near - low) / (high - low) if high > low else numpy.zeros_like(near)
        fused: numpy.ndarray = 0.7 * (words / best if best > 0 else words) + 0.3 * scaled
        return fused

    return score


def candidates() -> list[Fusion]:
    """The fusions a choice is made among: each midpoint of BM25's share (`MIDPOINTS`), on the scale
    before (depth 0) and standardized over each ranking's best 10, 20, 30 or 50 (`recall.Fusion`)."""
    return [Fusion(depth, midpoint) for depth in DEPTHS for midpoint in MIDPOINTS]


def parts(found: Scored) -> dict[str, Ranker]:
    """What hybrid must not fall below on a set: BM25 alone, the vectors alone, the plain convex fusion."""
    return {
        "bm25": lambda n: found.words[n],
        "vectors": lambda n: found.cosines[n],
        "plain convex": plain_convex(found),
    }


def chosen(sets: Sequence[Scored], recalls: dict[Fusion, dict[str, float]], floor: dict[str, float]) -> Fusion:
    """The candidate whose worst margin over `sets` above each set's `floor` is the greatest (the goal
    itself: never below the best part); on a tie, the best mean recall@5, each set counting once."""

    def merit(fusion: Fusion) -> tuple[float, float]:
        found = [recalls[fusion][one.name] for one in sets]
        worst = min(recall - floor[one.name] for recall, one in zip(found, sets, strict=True))
        return round(worst, 9), round(sum(found) / len(found), 9)

    return max(candidates(), key=merit)


def measure() -> dict[str, Any]:
    sets = [scored(one) for one in load_sets()]
    recalls = {fusion: {one.name: fusion_recall(fusion, one) for one in sets} for fusion in candidates()}
    results: dict[str, Any] = {"sets": {}, "held_out": {}}
    floor: dict[str, float] = {}
    for one in sets:
        recalled = {name: recall_at(ranker, one) for name, ranker in parts(one).items()}
        floor[one.name] = max(recalled.values())
        results["sets"][one.name] = {
            "records": one.words.shape[1],
            "questions": len(one.answers),
            **recalled,
            "curve": {f"{weight:.1f}": fusion_recall(Fusion(0, 1), one, weight) for weight in WEIGHTS},
            "curve, standardized": {
                f"{weight:.1f}": fusion_recall(Fusion(FUSION.depth, 1), one, weight) for weight in WEIGHTS
            },
            "curve, by coverage": {f"{m:.2f}": recalls[Fusion(FUSION.depth, m)][one.name] for m in MIDPOINTS},
        }
    for one in sets:
        picked = chosen([other for other in sets if other is not one], recalls, floor)
        best = max(parts(one).items(), key=lambda part: results["sets"][one.name][part[0]])
        pairs = list(zip(hits(fused(picked, one), one), hits(best[1], one), strict=True))
        results["held_out"][one.name] = {
            "chosen on the others": {"depth": picked.depth, "midpoint": picked.midpoint},
            "recall@5": recalls[picked][one.name],
            "best part": best[0],
            "won": sum(mine and not theirs for mine, theirs in pairs),
            "lost": sum(theirs and not mine for mine, theirs in pairs),
        }
    default = chosen(sets, recalls, floor)
    results["default"] = {"depth": default.depth, "midpoint": default.midpoint}
    for one in sets:
        results["sets"][one.name]["default"] = recalls[default][one.name]
    return results


def tables(results: dict[str, Any]) -> str:
    sets = results["sets"]
    default = results["default"]
    lines = [
        "### Recall@5 against a fixed share of BM25, per set (the local model)",
        "",
        "| set (records, questions), scale | " + " | ".join(f"{weight:.1f}" for weight in WEIGHTS) + " |",
        "| --- | " + " | ".join("---:" for _ in WEIGHTS) + " |",
    ]
    for name, found in sets.items():
        for curve, scale in (("curve", "before"), ("curve, standardized", f"best {FUSION.depth}")):
            cells = " | ".join(f"{found[curve][f'{weight:.1f}']:.3f}" for weight in WEIGHTS)
            lines.append(f"| {name} ({found['records']}, {found['questions']}), {scale} | {cells} |")
    lines += [
        "",
        "0.0 is the vectors alone, 1.0 BM25 alone. Scale *before*: BM25 over its best, cosine min-max; "
        f"*best {FUSION.depth}*: each standardized over its {FUSION.depth} best (`recall.Fusion`).",
        "",
        f"### Recall@5 against the midpoint of BM25's share by coverage, per set (best {FUSION.depth})",
        "",
        "| set | " + " | ".join(f"{m:.2f}" for m in MIDPOINTS) + " | BM25 | vectors | plain convex |",
        "| --- | " + " | ".join("---:" for _ in MIDPOINTS) + " | ---: | ---: | ---: |",
    ]
    for name, found in sets.items():
        cells = " | ".join(f"{found['curve, by coverage'][f'{m:.2f}']:.3f}" for m in MIDPOINTS)
        lines.append(
            f"| {name} | {cells} | {found['bm25']:.3f} | {found['vectors']:.3f} | {found['plain convex']:.3f} |"
        )
    lines += [
        "",
        "BM25's share for a query is c² / (c² + m²), c the best record's BM25 score over the query's ceiling "
        "(what a record of the average length holding each query word once scores), m the midpoint. Plain convex "
        "is 0.7 x max-normalized BM25 + 0.3 x min-max cosine.",
        "",
        "### Held out: recall@5 on each set of the fusion chosen on the other two",
        "",
        "| held-out set | chosen (depth, midpoint) | recall@5 held out | BM25 | vectors | plain convex | goal met "
        "| questions won / lost against the best of them |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for name, held in results["held_out"].items():
        picked, found = held["chosen on the others"], sets[name]
        met = held["recall@5"] >= max(found["bm25"], found["vectors"], found["plain convex"])
        lines.append(
            f"| {name} | {picked['depth']}, {picked['midpoint']:.2f} | {held['recall@5']:.3f} | {found['bm25']:.3f} | "
            f"{found['vectors']:.3f} | {found['plain convex']:.3f} | {'yes' if met else 'no'} "
            f"| {held['won']} / {held['lost']} ({held['best part']}) |"
        )
    same = (default["depth"], default["midpoint"]) == (FUSION.depth, FUSION.midpoint)
    lines += [
        "",
        f"The default, chosen on all three sets: depth {default['depth']}, midpoint {default['midpoint']:.2f} "
        f"({'recall.FUSION' if same else 'NOT recall.FUSION, which is ' + repr(FUSION)}); recall@5 "
        + ", ".join(f"{sets[name]['default']:.3f} on {name}" for name in sets)
        + ".",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    results = measure()
    publish(results, saved_as="fusion.json", section="fusion", tables=tables(results))


if __name__ == "__main__":
    main()
