"""Choosing hybrid's fusion on labelled sets of different kinds, and measuring it on a set it was
not chosen on (leave one set out), with the local model (WordLlama, offline).

Three sets: the project's conversations and team facts (`benchmarks/recall.py`), and one made by
others that a package ships in its wheel: the examples of the AWS API models botocore ships
(`botocore/data/<service>/<version>/examples-1.json`, written by AWS): each example's title and
description is a question, the documentation of the operation it illustrates (with its service's
name) the record that answers it, among every operation's documentation of those services. Every
ranking is computed over every record from our BM25 (`records.bm25`, as the store counts) and the
model's cosines; a fusion is a function of the two score vectors of a question, so a curve of
weights costs no search. `recall.py` measures the store's own rankings, the chosen default among them.

Run `python -m benchmarks.fusion`; `make bench` publishes its tables in docs/performance.md.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy

from bucket_memory.records import bm25
from bucket_memory.records.analyzer import Analyzer
from bucket_memory.records.recall import FUSION, Fusion, fused_scores

from .page import publish
from .recall import Labelled, load_sets

WEIGHTS = tuple(round(0.1 * n, 1) for n in range(11))  # BM25's share; 1.0 is BM25 alone, 0.0 vectors alone
DEPTHS = (0, 10, 20, 30, 50)
QUESTIONS = 500  # of the AWS set, every nth example so that a run stays within a minute or two
_TAG = re.compile(r"<[^>]+>")


def botocore_set() -> Labelled:
    """The AWS API examples set (above): the latest API version of each service with examples."""
    import botocore

    records: dict[str, str] = {}
    questions: list[tuple[str, frozenset[str]]] = []
    for service in sorted((Path(botocore.__file__).parent / "data").iterdir()):
        versions = sorted(found for found in service.iterdir() if found.is_dir()) if service.is_dir() else []
        if not versions or not (versions[-1] / "examples-1.json").exists():
            continue
        examples = json.loads((versions[-1] / "examples-1.json").read_text()).get("examples") or {}
        model = _model(versions[-1])
        if not examples or model is None:
            continue
        name = model.get("metadata", {}).get("serviceFullName", service.name)
        for operation, shape in model.get("operations", {}).items():
            said = " ".join(_TAG.sub(" ", shape.get("documentation", "")).split())
            if said:
                records[f"{service.name}.{operation}"] = f"{name}: {said}"[:1000]
        for operation, shown in examples.items():
            for example in shown:
                asked = " ".join(f"{example.get('title', '')}. {example.get('description', '')}".split())
                if f"{service.name}.{operation}" in records and len(asked) > 3:
                    questions.append((asked[:1000], frozenset({f"{service.name}.{operation}"})))
    step = max(1, len(questions) // QUESTIONS)
    return Labelled("AWS API examples (botocore)", records, questions[::step][:QUESTIONS])


def _model(version: Path) -> dict[str, Any] | None:
    for name in ("service-2.json.gz", "service-2.json"):
        if (version / name).exists():
            raw = (version / name).read_bytes()
            found: dict[str, Any] = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)
            return found
    return None


@dataclass(frozen=True, slots=True)
class Scored:
    """A set's questions scored against every record: BM25 and cosine, one row per question, and
    the column of each question's answers."""

    name: str
    words: numpy.ndarray
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
    words = numpy.stack([bm25.scores(analyzer.query_terms(q), [(postings, live)], corpus)[0] for q in questions])
    cosines = _unit(embedded(questions)) @ _unit(embedded(texts)).T
    where = {key: n for n, key in enumerate(keys)}
    return Scored(labelled.name, words, cosines, [{where[key] for key in wanted} for _, wanted in labelled.questions])


def _unit(rows: numpy.ndarray) -> numpy.ndarray:
    norms = numpy.linalg.norm(rows, axis=1, keepdims=True)
    unit: numpy.ndarray = numpy.divide(rows, norms, out=numpy.zeros_like(rows), where=norms > 0)
    return unit


def recall_at(scores: Callable[[int], numpy.ndarray], found: Scored, cut: int = 5) -> float:
    """The share of questions with an answer among the first `cut` records by `scores(question)`
    (ties broken by record order, as the store breaks them by id)."""
    hits = 0
    for n, wanted in enumerate(found.answers):
        row = scores(n)
        top = numpy.argsort(-row, kind="stable")[:cut]
        hits += bool(wanted & set(top[row[top] > -numpy.inf].tolist()))
    return hits / len(found.answers)


def fusion_recall(fusion: Fusion, found: Scored) -> float:
    return recall_at(lambda n: fused_scores(fusion, found.words[n], found.cosines[n]), found)


def plain_convex(found: Scored) -> float:
    """The issue's reference: 0.7 x max-normalized BM25 + 0.3 x min-max cosine, over every record."""

    def score(n: int) -> numpy.ndarray:
        words, near = found.words[n], found.cosines[n]
        best, low, high = words.max(), near.min(), near.max()
        scaled = (near - low) / (high - low) if high > low else numpy.zeros_like(near)
        fused: numpy.ndarray = 0.7 * (words / best if best > 0 else words) + 0.3 * scaled
        return fused

    return recall_at(score, found)


def candidates() -> list[Fusion]:
    """The fusions a choice is made among: each share of BM25 from 0.05 to 0.95, on the scale before
    (depth 0) and standardized over each ranking's best 10, 20, 30 or 50 (`recall.Fusion`)."""
    return [Fusion(round(0.05 * n, 2), depth) for depth in DEPTHS for n in range(1, 20)]


def chosen(sets: Sequence[Scored]) -> Fusion:
    """The candidate with the best mean recall@5 over `sets` (each set counting once); on a tie,
    the one with the best worst set."""

    def merit(fusion: Fusion) -> tuple[float, float]:
        found = [fusion_recall(fusion, one) for one in sets]
        return round(sum(found) / len(found), 9), min(found)

    return max(candidates(), key=merit)


def measure() -> dict[str, Any]:
    sets = [scored(one) for one in [*load_sets(), botocore_set()]]
    results: dict[str, Any] = {"sets": {}, "held_out": {}}
    for one in sets:
        results["sets"][one.name] = {
            "records": one.words.shape[1],
            "questions": len(one.answers),
            "curve": {f"{weight:.1f}": fusion_recall(Fusion(weight, 0), one) for weight in WEIGHTS},
            "curve, standardized": {
                f"{weight:.1f}": fusion_recall(Fusion(weight, FUSION.depth), one) for weight in WEIGHTS
            },
            "plain convex": plain_convex(one),
        }
    for one in sets:
        picked = chosen([other for other in sets if other is not one])
        results["held_out"][one.name] = {
            "chosen on the others": {"words": picked.words, "depth": picked.depth},
            "recall@5": fusion_recall(picked, one),
        }
    default = chosen(sets)
    results["default"] = {"words": default.words, "depth": default.depth}
    for one in sets:
        results["sets"][one.name]["default"] = fusion_recall(default, one)
    return results


def tables(results: dict[str, Any]) -> str:
    sets = results["sets"]
    default = results["default"]
    lines = [
        "### Recall@5 against BM25's share of the fusion, per set (the local model)",
        "",
        "| set (records, questions), scale | "
        + " | ".join(f"{weight:.1f}" for weight in WEIGHTS)
        + " | plain convex |",
        "| --- | " + " | ".join("---:" for _ in WEIGHTS) + " | ---: |",
    ]
    for name, found in sets.items():
        for curve, scale in (("curve", "before"), ("curve, standardized", f"best {FUSION.depth}")):
            cells = " | ".join(f"{found[curve][f'{weight:.1f}']:.3f}" for weight in WEIGHTS)
            size = f"{found['records']}, {found['questions']}"
            lines.append(f"| {name} ({size}), {scale} | {cells} | {found['plain convex']:.3f} |")
    lines += [
        "",
        "0.0 is the vectors alone, 1.0 BM25 alone. Scale *before*: BM25 over its best, cosine min-max; "
        f"*best {FUSION.depth}*: each standardized over its {FUSION.depth} best (`recall.Fusion`). Plain convex is "
        "0.7 x max-normalized BM25 + 0.3 x min-max cosine.",
        "",
        "### Held out: recall@5 on each set of the fusion chosen on the other two",
        "",
        "| held-out set | chosen (BM25 share, depth) | recall@5 held out | BM25 | vectors | plain convex |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, held in results["held_out"].items():
        picked = held["chosen on the others"]
        curve = sets[name]["curve"]
        lines.append(
            f"| {name} | {picked['words']:.2f}, {picked['depth']} | {held['recall@5']:.3f} | "
            f"{curve['1.0']:.3f} | {curve['0.0']:.3f} | {sets[name]['plain convex']:.3f} |"
        )
    lines += [
        "",
        f"The default, chosen on all three sets: BM25 share {default['words']:.2f}, depth {default['depth']}; "
        "recall@5 " + ", ".join(f"{sets[name]['default']:.3f} on {name}" for name in sets) + ".",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    results = measure()
    publish(results, saved_as="fusion.json", section="fusion", tables=tables(results))


if __name__ == "__main__":
    main()
