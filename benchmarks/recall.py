"""Recall@1/5/10 of record search on labelled sets, with the local model (WordLlama, offline).

Three sets: `benchmarks/conversations.json` (multi-session conversations of a user and an assistant,
one record per turn, questions an agent later asks its memory; see `benchmarks/conversations.py`
for how it was made), `benchmarks/recall_set.json` (facts a software team's agent keeps), and one
made by others that a package ships in its wheel: the examples of the AWS API models botocore
ships (`botocore/data/<service>/<version>/examples-1.json`, written by AWS), each example's title
and description a question, the documentation of the operation it illustrates (with its
service's name) the record that answers it, among every operation's documentation of those
services (`botocore_set`). Each
ranking of the store is measured through `LogRecordStore.search`, beside references computed in
the same run from the same texts: bm25s configured as its docs recommend (English stopwords and
a Snowball stemmer), our BM25 without a stemmer (the ranking before), cosine alone, reciprocal-rank
fusion (hybrid before) and a plain convex fusion over every record (0.7 x max-normalized bm25s +
0.3 x min-max-normalized cosine).

Run `python -m benchmarks.recall`; `make bench` publishes its table in docs/performance.md.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogRecordStore, MemoryAdmin
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.local_embedding import local_embedder
from bucket_memory.records.record_format import RecordBody

from .page import publish

HERE = Path(__file__).parent
CUTS = (1, 5, 10)
QUESTIONS = 500  # of the AWS set, every nth example so that a run stays within a minute or two
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True, slots=True)
class Labelled:
    """A set: record texts by id, and questions with the ids of the records that answer them."""

    name: str
    records: dict[str, str]
    questions: list[tuple[str, frozenset[str]]]


def load_sets() -> list[Labelled]:
    team = json.loads((HERE / "recall_set.json").read_text())
    found = [Labelled("team facts", team["records"], [(q["text"], frozenset(q["answers"])) for q in team["questions"]])]
    if (HERE / "conversations.json").exists():
        conversations = json.loads((HERE / "conversations.json").read_text())
        found.insert(
            0,
            Labelled(
                "conversations",
                {record["id"]: record["text"] for record in conversations["records"]},
                [(q["question"], frozenset(q["answers"])) for q in conversations["questions"]],
            ),
        )
    return [*found, botocore_set()]


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


def recall(rankings: Sequence[Sequence[str]], labelled: Labelled) -> dict[str, float]:
    """Per cut, the share of questions with an answer among the first `cut` ids of their ranking."""
    answered = [answers for _, answers in labelled.questions]
    return {
        f"@{cut}": sum(bool(set(ranked[:cut]) & wanted) for ranked, wanted in zip(rankings, answered, strict=True))
        / len(answered)
        for cut in CUTS
    }


async def store_rankings(labelled: Labelled) -> dict[str, list[list[str]]]:
    """The store's own rankings of every question: BM25 (stemmed, and as before without), vectors, hybrid."""
    objects = MemoryObjectStore()
    ids = {key: f"{n:032x}" for n, key in enumerate(labelled.records)}
    back = {value: key for key, value in ids.items()}
    bodies = {f"{ids[key]}.json": RecordBody(text, time_text(1.7e9)).encode() for key, text in labelled.records.items()}
    await MemoryAdmin(LogFileStore(objects)).put_files(bodies, replace=False, origin=Origin(run_id="recall"))
    embedder = local_embedder()
    stores = {
        "bm25": LogRecordStore(LogFileStore(objects, read_only=True)),
        "bm25, no stemmer (before)": LogRecordStore(LogFileStore(objects, read_only=True), language=None),
        "vectors": LogRecordStore(LogFileStore(objects, read_only=True), embedder=embedder, ranking="vectors"),
        "hybrid": LogRecordStore(LogFileStore(objects, read_only=True), embedder=embedder),
    }
    found: dict[str, list[list[str]]] = {}
    for name, store in stores.items():
        found[name] = [
            [back[record.id] for record in await store.search(question, limit=max(CUTS))]
            for question, _ in labelled.questions
        ]
    return found


def reference_rankings(labelled: Labelled) -> dict[str, list[list[str]]]:
    """The rankings computed outside the store, over every record of the set."""
    import bm25s
    import numpy
    import Stemmer

    from bucket_memory.records.local_embedding import embedded

    keys = list(labelled.records)
    texts = [labelled.records[key] for key in keys]
    stemmer = Stemmer.Stemmer("english")
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    questions = [question for question, _ in labelled.questions]
    documents, asked = embedded(texts), embedded(questions)

    def unit(rows: numpy.ndarray) -> numpy.ndarray:
        norms = numpy.linalg.norm(rows, axis=1, keepdims=True)
        unit_rows: numpy.ndarray = numpy.divide(rows, norms, out=numpy.zeros_like(rows), where=norms > 0)
        return unit_rows

    cosines = unit(asked) @ unit(documents).T
    words = numpy.zeros_like(cosines)
    for n, question in enumerate(questions):
        tokens = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
        known = [token for token in tokens if token in index.vocab_dict]
        if known:
            words[n] = index.get_scores(known)

    def ranked(score: Callable[[int], numpy.ndarray]) -> list[list[str]]:
        return [[keys[k] for k in numpy.argsort(-score(n), kind="stable")[: max(CUTS)]] for n in range(len(questions))]

    def convex(n: int) -> numpy.ndarray:
        best = words[n].max()
        low, high = cosines[n].min(), cosines[n].max()
        near = (cosines[n] - low) / (high - low) if high > low else numpy.zeros_like(cosines[n])
        fused: numpy.ndarray = 0.7 * (words[n] / best if best > 0 else words[n]) + 0.3 * near
        return fused

    def rank_fused(n: int) -> numpy.ndarray:
        fused = numpy.zeros(len(keys))
        for scores in (words[n], cosines[n]):
            order = numpy.argsort(-scores, kind="stable")[:50]
            fused[order] += 1 / (60 + numpy.arange(1, len(order) + 1))
        return fused

    return {
        "bm25s, stopwords + Snowball stemmer": ranked(lambda n: words[n]),
        "reciprocal-rank fusion (hybrid before)": ranked(rank_fused),
        "plain convex fusion, every record": ranked(convex),
    }


async def measure() -> dict[str, Any]:
    results: dict[str, Any] = {}
    for labelled in load_sets():
        rankings = {**await store_rankings(labelled), **reference_rankings(labelled)}
        results[labelled.name] = {
            "records": len(labelled.records),
            "questions": len(labelled.questions),
            "recall": {name: recall(found, labelled) for name, found in rankings.items()},
        }
    return results


def tables(results: dict[str, Any]) -> str:
    lines = []
    for name, found in results.items():
        lines += [
            f"### Recall on {name} ({found['records']} records, {found['questions']} questions; the local model)",
            "",
            "| ranking | recall@1 | recall@5 | recall@10 |",
            "| --- | ---: | ---: | ---: |",
        ]
        for ranking, cuts in found["recall"].items():
            lines.append(f"| {ranking} | " + " | ".join(f"{cuts[f'@{cut}']:.3f}" for cut in CUTS) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    from . import word_index

    results = asyncio.run(measure())
    publish(results, saved_as="recall.json", section="recall", tables=tables(results))
    word_index.main()


if __name__ == "__main__":
    main()
