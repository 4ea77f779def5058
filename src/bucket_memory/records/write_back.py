"""Vectors made at a search written back to their records, beside the vectors of other models
the records hold by then, so that no process pays for them again and none undoes another's."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin

from ..files.store import LogFileStore
from ..format.changes import Change, Write
from ..format.wire_values import stored_size
from ..state.operations import checked_size
from ..state.state import State
from .record_format import SUFFIX, RecordBody
from .record_index import Record

logger = logging.getLogger(__name__)

_EMBEDDINGS = Origin(run_id="bucket-memory:embeddings")


class VectorWriteBack:
    """Writes the vectors (or refusal marks) a search made back to the records of `files`, one
    commit a batch, as `bucket-memory:embeddings`; a failure is logged, never raised: the search
    keeps them in its process, and a later one writes them."""

    def __init__(self, files: LogFileStore) -> None:
        self.files = files

    async def keep(self, made: Sequence[Record]) -> None:
        """Write vectors (or refusal marks) made at a search back to their records, in one commit,
        so that no other process pays for them again. Each joins the vectors of other models its
        record holds by then (another process's write-back is never undone); a record whose text
        changed since it was read is left as it is (its new text has its own vectors or none), a
        refusal mark never takes the place of a vector another process made of the same model
        meanwhile in its space, and a record that would outgrow a file drops the vectors written longest ago."""
        if self.files.read_only or not made:
            return

        def plan(state: State) -> Sequence[Change]:
            changes: list[Change] = []
            growth = 0
            for found, version, body in made:
                path = found + SUFFIX
                current = state.files.get(path)
                if current is None:
                    continue
                if current.version != version:
                    stored = RecordBody.decode(current.text)
                    if stored is None or stored.text != body.text:
                        continue
                    new = body.embeddings[0]
                    held = stored.vector_of(new.model, new.size) if new.size is not None else None
                    if new.refused and held is not None and not held.refused:
                        continue  # another process's embedder took the text meanwhile: its vector stands
                    body = stored.with_vector(new)
                encoded = self._fitted(body)
                if encoded is None:
                    continue
                more = stored_size(encoded) - current.stored
                if state.stored_bytes + growth + more > self.files.max_bytes:
                    continue
                growth += more
                changes.append(Write(path=path, text=encoded))
            return changes

        try:
            await self.files.commit(plan, _EMBEDDINGS)
        except MemoryStoreError as error:  # kept in this process; a later search writes them
            logger.warning("%s: vectors made at a search were not written back: %s", self.files.location, error)

    def _fitted(self, body: RecordBody) -> str | None:
        """The file of `body`, less the vectors written longest ago until it fits (None: not even
        with its newest alone)."""
        for kept in range(len(body.embeddings), 0, -1):
            encoded = replace(body, embeddings=body.embeddings[:kept]).encode()
            if fits_a_file(encoded, self.files.format):
                return encoded
        return None


def fits_a_file(encoded: str, format: FileFormat) -> bool:
    """Whether a record's file text is one the memory's files may hold."""
    try:
        checked_size(encoded, format)
    except MemoryStoreError:
        return False
    return True
