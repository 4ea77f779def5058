"""Recall@5 of each ranking on a labelled set: records an agent of a software team might keep, and
questions whose answers are known (benchmarks/recall_set.json).

The questions are asked as people ask them, not in the records' words: some share a rare word with
their answer (a name, a product), some only common ones, some a word in another form ("deploys"
for "deploy"), and some none at all. The offline hashing model knows no synonyms, so on the last
kind every ranking fails here; a real embedding model would be measured the same way by passing
it (`recall_at_5(embedder)`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogRecordStore, MemoryAdmin
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.ranking import RANKINGS
from bucket_memory.records.record_format import RecordBody

if TYPE_CHECKING:
    from pydantic_ai import Embedder

SET = Path(__file__).with_name("recall_set.json")


def questions_per_kind() -> dict[str, int]:
    questions = json.loads(SET.read_text())["questions"]
    counted = {"all": len(questions)}
    for question in questions:
        counted[question["kind"]] = counted.get(question["kind"], 0) + 1
    return counted


async def recall_at_5(embedder: Embedder | None = None) -> dict[str, dict[str, float]]:
    """Per ranking, the share of the set's questions whose answer is among the first five records
    found: of all of them ("all") and of each kind."""
    from pydantic_ai import Embedder

    from bucket_memory.testing.embeddings import HashingEmbeddingModel

    labelled = json.loads(SET.read_text())
    objects = MemoryObjectStore()
    bodies = {f"{key}.json": RecordBody(text, time_text(1.7e9)).encode() for key, text in labelled["records"].items()}
    await MemoryAdmin(LogFileStore(objects)).put_files(bodies, replace=False, origin=Origin(run_id="recall-set"))
    made = embedder or Embedder(HashingEmbeddingModel(dimensions=384))
    kinds = ["all", *dict.fromkeys(question["kind"] for question in labelled["questions"])]
    found: dict[str, dict[str, float]] = {}
    for ranking in RANKINGS:
        store = LogRecordStore(LogFileStore(objects, read_only=True), embedder=made, ranking=ranking)
        hits = {kind: [0, 0] for kind in kinds}  # kind -> [found among the first five, asked]
        for question in labelled["questions"]:
            top = {record.id for record in await store.search(question["text"], limit=5)}
            for kind in ("all", question["kind"]):
                hits[kind][0] += bool(top & set(question["answers"]))
                hits[kind][1] += 1
        found[ranking] = {kind: got / asked for kind, (got, asked) in hits.items()}
    return found
