"""Record memory: the harness `RecordStore` contract on the commit log, one file per record.

A record memory is a memory like any other, under its own prefix: each record is the file
`<id>.json`, the canonical JSON of a `RecordBody` (its text, when it was written, and a vector
for each embedding model that made one). Every add, update and delete is one commit, so history, restore,
recover, verify and export work on records as they do on files.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self

from a13n_harness.providers.memory import (
    MemoryRecord,
    MemoryStoreError,
    Origin,
    RecordPage,
    validate_record_text,
)

from ..files.store import LogFileStore
from ..format.changes import Change, Delete
from ..format.wire_values import checked_origin, moment_of, stored_size, time_text
from ..history.erasure import Erasure, ErasurePlan
from ..runtime import deadline
from ..runtime.off_loop import off_loop
from ..runtime.telemetry import traced
from ..state.live_file import LiveFile
from ..state.operations import DeleteOp, WriteOp
from ..state.state import State
from .analyzer import DEFAULT_LANGUAGE, Analyzer
from .embedding import DEFAULT_BATCH, check_batch
from .extras import records_extra
from .ranking import RANKINGS, Ranking
from .recall import Notice, Recall
from .record_census import VectorCensus, census
from .record_format import ID_PATTERN, SUFFIX, RecordBody, record_id
from .record_index import Snapshot
from .write_back import VectorWriteBack, fits_a_file

if TYPE_CHECKING:
    from pydantic_ai import Embedder

logger = logging.getLogger(__name__)

RECORD_CHARS = 8000  # the harness's default `RecordMemoryLimits.record_chars`
_CURSOR = re.compile(r"after:([0-9a-f]{32})~([0-9a-f]{16}|new)")
_HEX = re.compile(r"[0-9a-f]{1,32}")
_SHORTEST = 4  # hex digits of an id's prefix, as git takes a commit's
_OVER_ATTEMPTS = 8  # writes over a record that others keep changing meanwhile, before `unavailable`
# Vectors made for records stored without one are written back as this origin's commits.


class LogRecordStore:
    """One record memory on the commit log; the harness record memory contract.

    Ids are 32 hex digits; `update` and `delete` of an id the memory does not hold raise
    `record_not_found`. The last writer wins: a write commits over whatever the record holds, with
    one conditional create when uncontended. Without an embedder `search` ranks by BM25 over the
    texts; with one (pydantic-ai's `Embedder`) each written record carries its vector, and `search`
    ranks as `ranking` says: "hybrid" (BM25 and cosine similarity among the vectors of that
    embedder's space, fused by score), "vectors" or "bm25"; BM25 counts words stemmed for
    `language` (a Snowball stemmer's name; None: words as written). Records stored without a vector of that
    space are embedded `embed_batch` texts a call and their vectors written back. Every operation,
    its embedding calls included, ends within the log's `operation_timeout`.
    """

    def __init__(
        self,
        files: LogFileStore,
        *,
        embedder: Embedder | None = None,
        record_chars: int = RECORD_CHARS,
        origin: Origin | None = None,
        embed_batch: int = DEFAULT_BATCH,
        ranking: Ranking = "hybrid",
        language: str | None = DEFAULT_LANGUAGE,
    ) -> None:
        if ranking not in RANKINGS or (ranking == "vectors" and embedder is None):
            raise ValueError(f"ranking must be one of {RANKINGS} (vectors needs an embedder), not {ranking!r}"[:300])
        self.files = files
        self.embedder = embedder
        self.record_chars = record_chars
        self.origin = checked_origin(origin or Origin(run_id="bucket-memory:records"))
        self._recall = Recall(check_batch(embed_batch), ranking, Analyzer.checked(language))
        self._write_back = VectorWriteBack(files)

    @property
    def location(self) -> str:
        return self.files.location

    async def aclose(self) -> None:
        """Settle and let go of the file store's client (`LogFileStore.aclose`)."""
        await self.files.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @classmethod
    def local(
        cls, root: str | os.PathLike[str], *, embedder: Embedder | None = None, **settings: Any
    ) -> LogRecordStore:
        """A record memory in a local directory; `settings` as for `LogFileStore`."""
        return cls(LogFileStore.local(root, **settings), embedder=embedder)

    @classmethod
    def s3(
        cls, client: Any = None, *, bucket: str, prefix: str = "", embedder: Embedder | None = None, **settings: Any
    ) -> LogRecordStore:
        """A record memory under `s3://bucket/prefix`, through the caller's aiobotocore client or its own."""
        return cls(LogFileStore.s3(client, bucket=bucket, prefix=prefix, **settings), embedder=embedder)

    @classmethod
    def gcs(
        cls, client: Any, *, bucket: str, prefix: str = "", embedder: Embedder | None = None, **settings: Any
    ) -> LogRecordStore:
        """A record memory under `gs://bucket/prefix`, through the caller's google-cloud-storage client."""
        return cls(LogFileStore.gcs(client, bucket=bucket, prefix=prefix, **settings), embedder=embedder)

    @traced("records.add")
    async def add(self, text: str) -> MemoryRecord:
        with deadline.within(self._timeout), records_extra():
            body, encoded = await self._body(text)
            new_id = secrets.token_hex(16)
            operation = WriteOp(path=new_id + SUFFIX, text=encoded, expected=None, max_bytes=self.files.max_bytes)
            await self.files.submit(operation, self.origin)
        return _record(new_id, body)

    @traced("records.update")
    async def update(self, record_id: str, text: str) -> MemoryRecord:
        path, quota = _path(record_id), self.files.max_bytes
        with deadline.within(self._timeout), records_extra():
            body, encoded = await self._body(text)
            await self._over(
                record_id, lambda version: WriteOp(path=path, text=encoded, expected=version, max_bytes=quota)
            )
        return _record(record_id, body)

    @traced("records.delete")
    async def delete(self, record_id: str) -> None:
        path, quota = _path(record_id), self.files.max_bytes
        with deadline.within(self._timeout):
            await self._over(record_id, lambda version: DeleteOp(path=path, expected=version, max_bytes=quota))

    @traced("records.purge")
    async def purge(self) -> None:
        """Delete every record in one commit; files under the prefix that are not records stay."""
        snapshot = await self._snapshot(await self.files.state())
        known = await off_loop(64 * snapshot.count(), lambda: {found: v for found, v, _ in snapshot.records()})

        def plan(state: State) -> Sequence[Change]:
            return [Delete(path=path) for path, live in state.files.items() if _is_record(path, live, known)]

        await self.files.commit(plan, self.origin)  # many files in one commit: the serial log, not an intent

    @traced("records.list")
    async def list(self, *, limit: int, cursor: str | None = None) -> RecordPage:
        state = await self.files.state()
        after = self._after(cursor, state)
        snapshot = await self._snapshot(state)
        ordered = await off_loop(64 * snapshot.count(), lambda: sorted(snapshot.records()))
        records = [_record(found, body) for found, _, body in ordered if found > after]
        page = max(limit, 1)
        if len(records) > page:
            return RecordPage(tuple(records[:page]), f"after:{records[page - 1].id}~{_memory_name(state)}")
        return RecordPage(tuple(records))

    @traced("records.search")
    async def search(self, query: str, *, limit: int) -> Recalled:
        """The `limit` records closest to `query`, best first; `notice` on the answer says what was
        ranked by words alone because the embedder failed (None: nothing was)."""
        query = _text(query, "A search query")[: self.record_chars]
        with deadline.within(self._timeout), records_extra():
            snapshot = await self._snapshot(await self.files.state())
            scored, notice = await self._recall.search(query, snapshot, limit, self.embedder, self._write_back.keep)
        return Recalled((_record(found, snapshot.body(found), score) for found, score in scored), notice)

    async def census(self) -> VectorCensus:
        """Which models' vectors the live records hold, and which texts each model refused."""
        snapshot = await self._snapshot(await self.files.state())
        return await off_loop(64 * snapshot.count(), lambda: census(snapshot))

    async def full_id(self, given: str) -> str:
        """The id of the one record whose id starts with `given` (at least 4 hex digits, as git takes
        a commit's), or `record_not_found` saying there is none, or which ones it could be."""
        prefix = given.strip().lower() if isinstance(given, str) else ""
        if not (len(prefix) >= _SHORTEST and _HEX.fullmatch(prefix)):
            raise MemoryStoreError(
                "record_not_found", f"{str(given)[:80]!r} is not a record id: give {_SHORTEST} to 32 of its hex digits."
            )
        snapshot = await self._snapshot(await self.files.state())
        found = await off_loop(
            64 * snapshot.count(), lambda: sorted(one for one, _, _ in snapshot.records() if one.startswith(prefix))
        )
        if len(found) == 1:
            return found[0]
        if not found:
            raise MemoryStoreError("record_not_found", f"No record's id starts with {prefix} in this memory.")
        named = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise MemoryStoreError(
            "record_not_found", f"{len(found)} records' ids start with {prefix} ({named}); give more of the id."
        )

    async def record_path(self, given: str) -> str:
        """The file of the record `given` names: the one live record whose id starts with it, else
        a whole id (a deleted record's), else `record_not_found`."""
        try:
            return _path(await self.full_id(given))
        except MemoryStoreError:
            if isinstance(given, str) and ID_PATTERN.fullmatch(given.strip().lower()):
                return _path(given.strip().lower())
            raise

    async def preview_erase(self, record_id: str) -> ErasurePlan:
        """What `erase(record_id)` would rewrite and delete now, changing nothing."""
        return await Erasure(self.files).plan(await self.record_path(record_id))

    async def erase(self, record_id: str) -> ErasurePlan:
        """Erase every text the record ever had from the memory's whole past (`erasure.py`), as the
        store's origin; a deleted record's history too, given its whole id."""
        return await Erasure(self.files).erase(await self.record_path(record_id), origin=self.origin)

    async def _snapshot(self, state: State) -> Snapshot:
        """The records as of `state`, from the index kept between calls."""
        with records_extra():
            return await self._recall.index.at(state)

    async def _over(self, record_id: str, operation: Callable[[str], WriteOp | DeleteOp]) -> None:
        """Commit `operation(version)` over the record `record_id` at the version it holds, through
        the fleet as a file's write is: the last writer wins, so one that finds the record changed
        since (`version_mismatch`) goes on over its new version; `record_not_found` when the log
        proves it gone (a head that may be stale is never taken for that proof)."""
        path = _path(record_id)
        # The head this process holds names the version (no probe: the commit checks it); a record
        # missing there may be another's newer one, so its absence is proven before it is told.
        current = (await self.files.held_state()).files.get(path)
        if current is None:
            current = (await self.files.state(proven=True)).files.get(path)
        version = str(current.version) if current is not None and RecordBody.decode(current.text) else None
        for _ in range(_OVER_ATTEMPTS):
            if version is None:
                raise MemoryStoreError("record_not_found", f"No record {record_id} in this memory (deleted?).")
            try:
                await self.files.submit(operation(version), self.origin)
                return
            except MemoryStoreError as error:
                if error.code != "version_mismatch":
                    raise
                now = error.current
                version = now.version if now is not None and RecordBody.decode(now.text) else None
        raise MemoryStoreError(
            "unavailable", f"Record {record_id} changed {_OVER_ATTEMPTS} times while it was written; try again."
        )

    @property
    def _timeout(self) -> float:
        return self.files.options.operation_timeout

    async def _body(self, text: str) -> tuple[RecordBody, str]:
        """The record a write makes of `text`, and its file's text, checked as readers will."""
        text = validate_record_text(_text(text, "A record's text"), max_chars=self.record_chars)
        embedding = None
        if self.embedder is not None:
            embedding = await self._recall.embed_document(self.embedder, text)
        at = time_text(await self.files.now())
        body = RecordBody(text=text, updated_at=at, embeddings=(embedding,) if embedding else ())
        encoded = body.encode()
        if not fits_a_file(encoded, self.files.format):
            vector = f" and its {embedding.model} vector" if embedding is not None else ""
            raise MemoryStoreError(
                "invalid_text",
                f"This record{vector} takes {stored_size(encoded)} bytes as a file; the memory's files hold at "
                f"most {self.files.format.max_file_bytes}. Shorten the text, or embed with fewer dimensions.",
            )
        return body, encoded

    def _after(self, cursor: str | None, state: State) -> str:
        if cursor is None:
            return ""
        match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
        if match is None or match[2] != _memory_name(state):
            raise MemoryStoreError(
                "invalid_cursor", "That cursor was not issued by this record memory; list again without one."
            )
        return match[1]


class Recalled(tuple[MemoryRecord, ...]):
    """A search's records, best first (a tuple, as the harness's contract has it), and its `notice`:
    what it ranked by words alone because the embedder failed on the query or its calls (None:
    nothing was)."""

    notice: Notice | None

    def __new__(cls, records: Iterable[MemoryRecord], notice: Notice | None = None) -> Recalled:
        made = super().__new__(cls, records)
        made.notice = notice
        return made


def _text(text: object, what: str) -> str:
    """`text` if it is a string of UTF-8 text, else `invalid_text` (the harness's rule for records
    assumes a string, and a store never writes text it cannot encode)."""
    if not isinstance(text, str):
        raise MemoryStoreError("invalid_text", f"{what} is a string, not {type(text).__name__}.")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise MemoryStoreError("invalid_text", f"{what} is UTF-8 text; this one has unpaired surrogates.") from None
    return text


def _memory_name(state: State) -> str:
    return state.genesis[:16] if state.genesis else "new"


def _path(given: object) -> str:
    if not (isinstance(given, str) and ID_PATTERN.fullmatch(given)):
        raise MemoryStoreError("record_not_found", f"No record {str(given)[:80]!r} in this memory.")
    return given + SUFFIX


def _is_record(path: str, live: LiveFile, known: dict[str, int]) -> bool:
    """Whether a file holds a record: known to, at that version, else decoded."""
    found = record_id(path)
    return found is not None and (known.get(found) == live.version or RecordBody.decode(live.text) is not None)


def is_record_path(path: str) -> bool:
    """Whether a file of a memory is a record's (`<32 hex>.json`)."""
    return record_id(path) is not None


def _record(found: str, body: RecordBody, score: float | None = None) -> MemoryRecord:
    return MemoryRecord(found, body.text, score, moment_of(body.updated_at))
