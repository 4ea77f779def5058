"""Recall's words and models: BM25 over Snowball stems (a word in another form still matches), the
language checked as hostile input, hybrid that keeps a strong word match first, and the local
model (WordLlama, in this process, offline) that ranks by meaning where no word is shared.

What a broken implementation would get wrong: "supported the group" missed by "support group",
an unknown language taken (and every search failing later), a vector space named after no model,
a local embedder that reaches for the network or blocks the event loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin
from pydantic_ai import Embedder
from pydantic_ai.embeddings import EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.exceptions import ModelHTTPError

from bucket_memory import LogFileStore, LogRecordStore, open_record_store
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.record_format import RecordBody
from bucket_memory.testing.embeddings import HashingEmbeddingModel
from bucket_memory.testing.stalls import stall_meter

from .test_cli_records import run
from .test_event_loop import LONGEST_STALL

ORIGIN = Origin(principal_id="recall-test")
LOCAL_SPACE = "local:wordllama-l2-supercat-256"


async def test_bm25_matches_another_form_of_a_word_unless_told_the_language_is_none() -> None:
    objects = MemoryObjectStore()
    stemmed = LogRecordStore(LogFileStore(objects), origin=ORIGIN)
    added = await stemmed.add("Maya supported the group she volunteered with.")
    await stemmed.add("The weather was grey all week.")
    assert [record.id for record in await stemmed.search("support groups volunteering", limit=5)] == [added.id]
    literal = LogRecordStore(LogFileStore(objects, read_only=True), language=None)
    assert not await literal.search("support groups volunteering", limit=5)
    assert [record.id for record in await literal.search("supported", limit=5)] == [added.id]
    french = LogRecordStore(LogFileStore(objects, read_only=True), language="french")
    assert len(await french.search("group", limit=5)) == 1, "the stemmer of another language still indexes"


@pytest.mark.parametrize("language", ["klingon", "", "English", "english\x00", 5, ["english"], b"english", True])
def test_a_language_no_stemmer_knows_is_refused_with_the_choices(language: Any) -> None:
    with pytest.raises(ValueError, match="english") as caught:
        LogRecordStore(LogFileStore(MemoryObjectStore()), language=language)
    assert len(str(caught.value)) < 700


async def test_the_local_model_ranks_by_meaning_offline_and_stores_its_space(tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    async with open_record_store(url, embedder="local", origin=ORIGIN) as store:
        pet = await store.add("Maya: I adopted a beagle named Biscuit last spring.")
        await store.add("Maya: My sister's wedding is on the ninth of June.")
        await store.add("Tom: I started a new job as a nurse at St. Mary's.")
        async with stall_meter() as searching:
            found = await store.search("Which animal lives with Maya?", limit=3)
        assert searching.longest < LONGEST_STALL
        state = await store.files.state()
    assert found[0].id == pet.id
    stored = [json.loads(live.text)["embedding"] for live in state.files.values()]
    assert len(stored) == 3 and all(vector["model"] == LOCAL_SPACE for vector in stored)
    async with open_record_store(url, embedder="local", ranking="vectors", read_only=True) as reader:
        assert (await reader.search("What does Tom do for a living?", limit=1))[0].text.startswith("Tom:")


def test_the_command_line_takes_the_local_embedder(tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    run("records", "add", url, "Maya: I adopted a beagle named Biscuit.", "--embedder", "local")
    found = json.loads(run("records", "search", url, "Which pet?", "--embedder", "local", "--json"))
    assert found[0]["text"].startswith("Maya:")


class Refusing(HashingEmbeddingModel):
    """The offline model with a provider's limit: documents `refuse` picks fail their whole call
    (as a 400 for an input over the token limit does)."""

    def __init__(self, refuse: Callable[[str], bool]) -> None:
        super().__init__()
        self.refuse = refuse
        self.calls = 0

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        self.calls += 1
        if input_type == "document" and any(self.refuse(text) for text in texts):
            raise ModelHTTPError(400, self.model_name, body="input exceeds the model's token limit")
        return await super().embed(inputs, input_type=input_type, settings=settings)


async def unembedded(objects: ObjectStore, texts: Sequence[str]) -> list[str]:
    plain = LogRecordStore(LogFileStore(objects), origin=ORIGIN)  # no embedder: stored without vectors
    return [(await plain.add(text)).id for text in texts]


@pytest.mark.parametrize("others", [0, 6])
async def test_a_record_the_embedder_refuses_is_searched_by_words_and_not_asked_again(others: int) -> None:
    objects = MemoryObjectStore()
    ids = await unembedded(objects, [*(f"note {n} about green tea" for n in range(others)), "REFUSE: green tea " * 40])
    model = Refusing(lambda text: text.startswith("REFUSE"))
    store = LogRecordStore(LogFileStore(objects), embedder=Embedder(model), embed_batch=4, origin=ORIGIN)
    assert {record.id for record in await store.search("green tea", limit=10)} == set(ids)
    calls = model.calls
    assert {record.id for record in await store.search("green tea", limit=10)} == set(ids)
    assert model.calls == calls + 1, "only the query: the refused text is not asked for on every search"
    state = await store.files.state()
    bodies = {path.removesuffix(".json"): RecordBody.decode(live.text) for path, live in state.files.items()}
    stored = {found: body.embeddings[0] for found, body in bodies.items() if body and body.embeddings}
    assert sum(not one.refused for one in stored.values()) == others, "every other record's vector was made and kept"
    assert stored[ids[-1]].refused, "the refused text is marked for its model in the memory"
    another = Refusing(lambda text: text.startswith("REFUSE"))
    elsewhere = LogRecordStore(LogFileStore(objects), embedder=Embedder(another), embed_batch=4, origin=ORIGIN)
    assert {record.id for record in await elsewhere.search("green tea", limit=10)} == set(ids)
    assert another.calls == 1, "another process reads the mark: it asks only for its query"


async def test_an_embedder_that_refuses_every_text_marks_each_once_and_search_answers() -> None:
    """It answered the query, so its 400s are about the texts: each is marked (named by `records
    doctor`) and searched by words; before, every search was `unavailable` and nothing was marked."""
    objects = MemoryObjectStore()
    await unembedded(objects, [f"note {n} about green tea" for n in range(5)])
    model = Refusing(lambda text: True)
    store = LogRecordStore(LogFileStore(objects), embedder=Embedder(model), embed_batch=4, origin=ORIGIN)
    assert len(await store.search("green tea", limit=10)) == 5
    calls = model.calls
    assert len(await store.search("green tea", limit=10)) == 5
    assert model.calls == calls + 1
    assert [len(one.refused) for one in (await store.census()).models] == [5]


def test_the_local_model_leaves_no_folder_behind_and_the_hosts_logging_as_it_was(tmp_path: Path) -> None:
    """WordLlama calls `logging.basicConfig(level=INFO)` on import, and its tokenizer was copied to
    a temporary folder left behind by every process (1.8 MB each)."""
    import subprocess
    import sys

    script = (
        "import asyncio, logging\n"
        "from bucket_memory.records.local_embedding import local_embedder\n"
        "vectors = asyncio.run(local_embedder().embed_documents(['green tea']))\n"
        "root = logging.getLogger()\n"
        "assert len(vectors.embeddings[0]) == 256\n"
        "print(len(root.handlers), logging.getLevelName(root.level))\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "WARNING"], "the host's root logger untouched"
    assert list(tmp_path.iterdir()) == [], "no temporary folder left"
