"""Writes stored as edits: the span found is exact and minimal, applies only to the text it was
made against, and a memory written through edits reads back whole in any other store."""

from __future__ import annotations

import asyncio

from a13n_harness.providers.memory import Origin
from hypothesis import given, settings
from hypothesis import strategies as st

from bucket_memory import LogFileStore
from bucket_memory.format.delta import splice, spliced
from bucket_memory.objects.memory import MemoryObjectStore

from .helpers import replay

ORIGIN = Origin(principal_id="edits")
alphabet = st.sampled_from(["a", "b", "\n", '"', "\\", "é", "🍵", "\x00"])
texts = st.text(alphabet, max_size=60)


@st.composite
def rewrites(draw: st.DrawFn) -> tuple[str, str]:
    """A text and another made from it by a few cuts and insertions (or unrelated)."""
    old = draw(texts)
    new = old
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(new)))
        cut = draw(st.integers(0, len(new) - at))
        new = new[:at] + draw(texts) + new[at + cut :]
    return old, draw(st.one_of(st.just(new), texts))


@given(rewrites())
def test_a_splice_rebuilds_the_new_text_and_undoes_to_the_old(pair: tuple[str, str]) -> None:
    old, new = pair
    at, removed, inserted = splice(old, new)
    assert spliced(old, at, removed, inserted) == new
    assert spliced(new, at, inserted, removed) == old
    # Minimal: the text kept on both sides is all the two share there.
    tail = len(old) - at - len(removed)
    assert not (removed and inserted and removed[0] == inserted[0])
    assert not (removed and inserted and removed[-1] == inserted[-1])
    assert old[:at] == new[:at] and old[len(old) - tail :] == new[len(new) - tail :]


@given(rewrites(), texts)
def test_a_splice_applies_only_to_the_text_it_was_made_against(pair: tuple[str, str], other: str) -> None:
    old, new = pair
    at, removed, inserted = splice(old, new)
    result = spliced(other, at, removed, inserted)
    assert result is None or other[at : at + len(removed)] == removed


@settings(max_examples=40, deadline=None)
@given(st.lists(rewrites(), min_size=1, max_size=8), st.integers(0, 2000))
def test_a_memory_written_through_edits_reads_back_in_another_store(steps: list[tuple[str, str]], padding: int) -> None:
    """Long texts make edits worth storing; each step rewrites the file from what it holds."""

    async def run() -> None:
        objects = MemoryObjectStore()
        store = LogFileStore(objects)
        text = "p" * padding
        version = await store.write("f.md", text, expected=None, origin=ORIGIN)
        for old, new in steps:
            text = text + old
            version = await store.write("f.md", text, expected=version, origin=ORIGIN)
            text = text[: len(text) - len(old)] + new
            version = await store.write("f.md", text, expected=version, origin=ORIGIN)
        state, _ = await replay(objects)
        assert state.files["f.md"].text == text
        assert (await LogFileStore(objects).read("f.md")).text == text

    asyncio.run(run())
