"""Record memory: the harness `RecordStore` contract on the commit log, one file per record.

A record memory is a memory like any other, under its own prefix: each record is the file
`<id>.json`, the canonical JSON of a `RecordBody` (its text, when it was written, and its vector
when an embedder made one). Every add, update and delete is one commit, so history, restore,
recover, verify and export work on records as they do on files.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from a13n_harness.providers.memory import (
    MemoryRecord,
    MemoryStoreError,
    Origin,
    RecordPage,
    validate_record_text,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .codec import Change, Delete, Time, Write, canonical, checked_origin, moment_of, stored_size, time_text
from .recall import Ranking
from .state import LiveFile, State
from .store import LogFileStore, checked_size
from .telemetry import traced

if TYPE_CHECKING:
    from pydantic_ai import Embedder

RECORD_CHARS = 8000  # the harness's default `RecordMemoryLimits.record_chars`
_ID = re.compile(r"[0-9a-f]{32}")
_SUFFIX = ".json"
_CURSOR = re.compile(r"after:([0-9a-f]{32})~([0-9a-f]{16}|new)")


class Embedding(BaseModel):
    """A record's vector: the embedding model that made it and its values as base64 of
    little-endian float16 (2 bytes a dimension: 10,000 records of 1,536 dimensions take 40 MB)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    model: Annotated[str, Field(min_length=1, max_length=200)]
    vector: Annotated[str, Field(max_length=16 * 1024, pattern=r"^[A-Za-z0-9+/]*={0,2}$")]


class RecordBody(BaseModel):
    """What a record's file holds."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    text: str
    updated_at: Time
    embedding: Embedding | None = None

    def encode(self) -> str:
        return canonical(self.model_dump(mode="json", exclude_none=True)).decode()

    @classmethod
    def decode(cls, text: str) -> RecordBody | None:
        """The record a file holds, or None for a file that is not one (written through the file
        tools, say): such files are skipped, never served as records."""
        try:
            body = cls.model_validate_json(text)
        except ValidationError:
            return None
        return body if body.encode() == text else None


class LogRecordStore:
    """One record memory on the commit log; the harness record memory contract.

    Ids are 32 hex digits; `update` and `delete` of an id the memory does not hold raise
    `record_not_found`. The last writer wins: a write commits over whatever the record holds, with
    one conditional create when uncontended. With an `embedder` (pydantic-ai's `Embedder`), each
    written record carries its vector and `search` ranks by cosine similarity among the vectors
    of that embedder's model; without one, by BM25 over the texts.
    """

    def __init__(
        self,
        files: LogFileStore,
        *,
        embedder: Embedder | None = None,
        record_chars: int = RECORD_CHARS,
        origin: Origin | None = None,
    ) -> None:
        self.files = files
        self.embedder = embedder
        self.record_chars = record_chars
        self.origin = checked_origin(origin or Origin(run_id="bucket-memory:records"))
        self._ranking = Ranking()
        self._bodies: dict[str, tuple[int, RecordBody | None]] = {}  # path -> (version, record) as last decoded

    @property
    def location(self) -> str:
        return self.files.location

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
        body, encoded = await self._body(text)
        record_id = secrets.token_hex(16)
        path = record_id + _SUFFIX

        def plan(state: State) -> Sequence[Change]:
            self.files.check_quota(state, stored_size(encoded))
            return (Write(path=path, text=encoded),)

        await self.files.log.commit(plan, self.origin)
        return _record(record_id, body)

    @traced("records.update")
    async def update(self, record_id: str, text: str) -> MemoryRecord:
        path = _path(record_id)
        body, encoded = await self._body(text)

        def plan(state: State) -> Sequence[Change]:
            current = _held(state, path, record_id)
            self.files.check_quota(state, stored_size(encoded) - current.stored)
            return (Write(path=path, text=encoded),)

        await self.files.log.commit(plan, self.origin)
        return _record(record_id, body)

    @traced("records.delete")
    async def delete(self, record_id: str) -> None:
        path = _path(record_id)

        def plan(state: State) -> Sequence[Change]:
            _held(state, path, record_id)
            return (Delete(path=path),)

        await self.files.log.commit(plan, self.origin)

    @traced("records.purge")
    async def purge(self) -> None:
        await self.files.purge()

    @traced("records.list")
    async def list(self, *, limit: int, cursor: str | None = None) -> RecordPage:
        state = await self.files.log.fresh_state()
        after = self._after(cursor, state)
        bodies = self._records(state)
        records = [_record(record_id, bodies[record_id]) for record_id in sorted(bodies) if record_id > after]
        page = max(limit, 1)
        if len(records) > page:
            return RecordPage(tuple(records[:page]), f"after:{records[page - 1].id}~{_memory_name(state)}")
        return RecordPage(tuple(records))

    @traced("records.search")
    async def search(self, query: str, *, limit: int) -> tuple[MemoryRecord, ...]:
        query = _text(query, "A search query")
        bodies = self._records(await self.files.log.fresh_state())
        scored = await self._ranking.rank(query, bodies, limit, self.embedder)
        return tuple(_record(record_id, bodies[record_id], score) for record_id, score in scored)

    def _records(self, state: State) -> dict[str, RecordBody]:
        """Every record of the state by id, decoded once per version; files that are not records left out."""
        decoded: dict[str, tuple[int, RecordBody | None]] = {}
        for path, live in state.files.items():
            if _record_id(path) is None:
                continue
            known = self._bodies.get(path)
            if known is None or known[0] != live.version:
                known = (live.version, RecordBody.decode(live.text))
            decoded[path] = known
        self._bodies = decoded
        return {path.removesuffix(_SUFFIX): body for path, (_, body) in decoded.items() if body is not None}

    async def _body(self, text: str) -> tuple[RecordBody, str]:
        """The record a write makes of `text`, and its file's text, checked as readers will."""
        text = validate_record_text(_text(text, "A record's text"), max_chars=self.record_chars)
        embedding = None
        if self.embedder is not None:
            embedding = await self._ranking.embed_document(self.embedder, text)
        body = RecordBody(text=text, updated_at=time_text(await self.files.log.objects.now()), embedding=embedding)
        encoded = body.encode()
        checked_size(encoded, self.files.format)  # what readers of the memory accept as a file
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


def _path(record_id: object) -> str:
    if not (isinstance(record_id, str) and _ID.fullmatch(record_id)):
        raise MemoryStoreError("record_not_found", f"No record {str(record_id)[:80]!r} in this memory.")
    return record_id + _SUFFIX


def _held(state: State, path: str, record_id: str) -> LiveFile:
    current = state.files.get(path)
    if current is None or RecordBody.decode(current.text) is None:
        raise MemoryStoreError("record_not_found", f"No record {record_id} in this memory (deleted?).")
    return current


def is_record_path(path: str) -> bool:
    """Whether a file of a memory is a record's (`<32 hex>.json`)."""
    return _record_id(path) is not None


def _record_id(path: str) -> str | None:
    record_id = path.removesuffix(_SUFFIX)
    return record_id if path.endswith(_SUFFIX) and _ID.fullmatch(record_id) else None


def _record(record_id: str, body: RecordBody, score: float | None = None) -> MemoryRecord:
    return MemoryRecord(record_id, body.text, score, moment_of(body.updated_at))
