"""The on-disk format: object keys, changes, commits and checkpoints as strict models, and their hash.

A memory owns exactly `log/<20 digits>.json` and `checkpoints/<20 digits>.json` under its prefix.
Every object is canonical JSON (sorted keys, UTF-8, no spaces) whose `hash` is the SHA-256 of the
rest. Decoding treats the bytes as hostile: size, nesting depth and numbers are bounded by the
parser, every field is checked by a strict model, paths obey the harness's path rules, and the
object must re-encode to exactly the bytes read. Encoding runs the same decoder over its own
output before anything is written, so no writer can commit an object that readers refuse.
`tests/golden/` pins the format of the first release byte for byte.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
import secrets
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, Self

import pydantic_core
from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin, validate_path
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_validator,
)
from pydantic import model_serializer as _model_serializer

from .canonical_json import canonical_members, joined

FORMAT = 1
# Commits that carry an edit: readers of format 1 only refuse them with a message to upgrade.
EDIT_FORMAT = 2
LOG_PREFIX = "log/"
CHECKPOINT_PREFIX = "checkpoints/"
RESERVED_FOLDERS = ("log", "checkpoints")
GENESIS_HASH = "0" * 64
# The largest object a reader accepts: a whole memory of 32 MiB of text, several times over for
# JSON escapes. Anything larger is refused before it is parsed.
MAX_OBJECT_BYTES = 256 * 1024 * 1024
# Objects past this size are encoded and decoded in a worker thread: parsing a whole memory's
# checkpoint takes long enough (about 250 ms for 32 MiB) to stall every other coroutine.
OFF_LOOP_BYTES = 256 * 1024
MAX_SEQ = 10**20 - 1
MAX_ORIGIN_CHARS = 1024
# Wide enough for any path a store with a larger `FileFormat.path_bytes` may have written.
_WIRE_FORMAT = FileFormat(path_bytes=4096)
_KEY = re.compile(r"(log|checkpoints)/(\d{20})\.json")
_ESCAPED = bytes(range(32)) + b'"\\'
_SHORT_ESCAPED = b'"\\\b\f\n\r\t'
# Segments of printable ASCII other than "/" and "\\", none of them "." or "..": a path the harness's
# `validate_path` returns unchanged (ASCII is its own NFC form).
_SEGMENT = r"(?!\.\.?(?:/|$))[ -.0-\[\]-~]+"
_PLAIN_PATH = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
_TIME = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


def log_key(seq: int) -> str:
    return f"{LOG_PREFIX}{seq:020d}.json"


def checkpoint_key(seq: int) -> str:
    return f"{CHECKPOINT_PREFIX}{seq:020d}.json"


def key_seq(key: str) -> int | None:
    """The seq of a key the store writes (`log/<20 digits>.json` or `checkpoints/...`), else None."""
    match = _KEY.fullmatch(key)
    return int(match[2]) if match else None


class CorruptObjectError(MemoryStoreError):
    """An object under the memory's prefix is not what the store wrote there; nothing is served past it."""

    def __init__(self, location: str, key: str, reason: str) -> None:
        super().__init__(
            "unavailable",
            f"{location}/{key} is corrupt ({reason}). The memory is not served past it; "
            f"run `bucket-memory verify {location}` and restore the object from bucket versioning.",
        )
        self.key = key
        self.reason = reason


RECOVER_RUN = "bucket-memory recover"
_REAPPLIES = "reapplies:"


def reapplication(fork: str) -> Origin:
    """The origin of the commit by which recovery re-applies fork commit `fork` (an id)."""
    return Origin(run_id=RECOVER_RUN, tool_call_id=f"{_REAPPLIES}{fork}")


def reapplied_fork(origin: Origin) -> str | None:
    """The id of the fork commit whose re-application `origin` marks, if it marks one."""
    tool_call = origin.tool_call_id or ""
    return (
        tool_call.removeprefix(_REAPPLIES)
        if origin.run_id == RECOVER_RUN and tool_call.startswith(_REAPPLIES)
        else None
    )


def checked_origin(origin: object) -> Origin:
    """The caller's origin if every field is None or a short string of UTF-8 text, else `invalid_text`.

    Checked before a change is batched, so a bad origin fails its own caller and nobody else. The
    mark of a recovery's re-application is refused: recovery skips the forks it names, so a writer
    that could forge it could make an acknowledged fork commit vanish.
    """
    checked = _origin_text(origin)
    if reapplied_fork(checked) is not None:
        raise MemoryStoreError(
            "invalid_text",
            f"An origin with run_id {RECOVER_RUN!r} and a tool call id starting {_REAPPLIES!r} is reserved for "
            "`bucket-memory recover`; use another run id or tool call id.",
        )
    return checked


def _origin_text(origin: object) -> Origin:
    """`origin` if every field is None or a short string of UTF-8 text, else `invalid_text`."""
    if not isinstance(origin, Origin):
        raise MemoryStoreError("invalid_text", f"An origin is an a13n_harness Origin, not {type(origin).__name__}.")
    for name in ("run_id", "principal_id", "tool_call_id"):
        value = getattr(origin, name)
        if value is not None and not _is_origin_text(value):
            raise MemoryStoreError(
                "invalid_text",
                f"Origin.{name} must be None or a string of at most {MAX_ORIGIN_CHARS} characters of UTF-8 text "
                f"without control characters; got {type(value).__name__} {str(value)[:80]!r}.",
            )
    return origin


def _is_origin_text(value: object) -> bool:
    if type(value) is not str or len(value) > MAX_ORIGIN_CHARS:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return not any(unicodedata.category(char) == "Cc" for char in value)


def _wire_origin(origin: Origin) -> Origin:
    try:
        return _origin_text(origin)
    except MemoryStoreError as error:
        raise ValueError(str(error)) from None


def checked_path(path: object, fmt: FileFormat) -> str:
    """The canonical form of a file path, or `invalid_path`: the harness's `validate_path`, with
    plain printable ASCII (nearly every path) checked by one regular expression, ten times faster."""
    if not isinstance(path, str):
        raise MemoryStoreError("invalid_path", f"A path is a string, not {type(path).__name__}.")
    if len(path) <= fmt.path_bytes and _PLAIN_PATH.fullmatch(path):
        return path
    return validate_path(path, fmt)


def _wire_path(path: str) -> str:
    try:
        canonical = checked_path(path, _WIRE_FORMAT)
    except MemoryStoreError as error:
        raise ValueError(f"path {path[:80]!r}: {error}") from None
    if canonical != path:
        raise ValueError(f"path {path[:80]!r} is not in NFC form")
    return path


def _real_time(time: str) -> str:
    """A time of the commit format that names a moment the calendar has (the pattern admits month 13)."""
    moment_of(time)  # raises ValueError for a date or hour that does not exist
    return time


type WireOrigin = Annotated[Origin, AfterValidator(_wire_origin)]
type WirePath = Annotated[str, AfterValidator(_wire_path)]
type Seq = Annotated[int, Field(ge=0, le=MAX_SEQ)]
type Hash = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
type Time = Annotated[str, Field(pattern=_TIME), AfterValidator(_real_time)]


class _Wire(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)
    # Fields written only when set, so that objects without them re-encode to their exact bytes.
    _written_when_set: ClassVar[frozenset[str]] = frozenset()

    @_model_serializer(mode="wrap")
    def _without_unset_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        encoded: dict[str, Any] = handler(self)
        for name in self._written_when_set:
            if encoded.get(name) is None:
                encoded.pop(name, None)
        return encoded


class _Change(_Wire):
    """A change's `origin` is set when a group commit carries changes of several callers: it names
    the caller of that change, where the commit's own origin names the first."""

    _written_when_set = frozenset({"origin"})
    origin: WireOrigin | None = None


class Write(_Change):
    __match_args__ = ("path", "text")
    op: Literal["write"] = "write"
    path: WirePath
    text: str


class Edit(_Change):
    """A write of a file that exists as the one span it changes (see `delta`): `removed` at code
    point `at` becomes `inserted`, and the text is then `size` bytes of UTF-8. Commits that carry
    one are of format 2."""

    __match_args__ = ("path", "at", "removed", "inserted")
    op: Literal["edit"] = "edit"
    path: WirePath
    at: Annotated[int, Field(ge=0, le=MAX_OBJECT_BYTES)]
    removed: str
    inserted: str
    size: Annotated[int, Field(ge=0, le=MAX_OBJECT_BYTES)]


class Delete(_Change):
    __match_args__ = ("path",)
    op: Literal["delete"] = "delete"
    path: WirePath


class Move(_Change):
    __match_args__ = ("source", "destination")
    op: Literal["move"] = "move"
    source: WirePath = Field(validation_alias="from", serialization_alias="from")
    destination: WirePath = Field(validation_alias="to", serialization_alias="to")


class Purge(_Change):
    op: Literal["purge"] = "purge"


type Change = Annotated[Write | Edit | Delete | Move | Purge, Field(discriminator="op")]


class _Signed(_Wire):
    """An object whose `hash` covers the canonical encoding of every other field, stored at the key
    its `seq` names."""

    seq: Seq
    hash: Hash

    def encode(self) -> bytes:
        return joined(self._members.values())

    def body_digest(self) -> str:
        """The SHA-256 of the canonical encoding without `hash`: the same member bytes `encode`
        joins, so a reader encodes a large checkpoint once, not once to hash and once to compare."""
        return hashlib.sha256(joined(member for name, member in self._members.items() if name != "hash")).hexdigest()

    @cached_property
    def _members(self) -> dict[str, bytes]:
        return canonical_members(self.model_dump(mode="json", by_alias=True))

    @classmethod
    def signed(cls, **fields: Any) -> Self:
        """A new object with its hash, proven to decode back to itself before anyone writes it."""
        unsigned = cls.model_validate({**fields, "hash": GENESIS_HASH}, strict=False)
        members = canonical_members(unsigned.model_dump(mode="json", by_alias=True))
        body = joined(member for name, member in members.items() if name != "hash")
        hashed = hashlib.sha256(body).hexdigest()
        members["hash"] = canonical_members({"hash": hashed})["hash"]
        made = unsigned.model_copy(update={"hash": hashed})
        # The members just made are the new object's encoding: kept so that writing it encodes
        # nothing again (`unsigned` never cached its own, so model_copy carried none along).
        made.__dict__["_members"] = members
        encoded = made.encode()
        if len(encoded) > MAX_OBJECT_BYTES or cls._decoded(encoded) != made:
            raise MemoryStoreError(
                "too_large", f"This change would make an object readers refuse ({len(encoded)} bytes)."
            )
        return made

    @classmethod
    def decode(cls, location: str, key: str, data: bytes) -> Self:
        """The object in `data`, read from `key`, or `CorruptObjectError` naming what is wrong with it."""
        if len(data) > MAX_OBJECT_BYTES:
            raise CorruptObjectError(location, key, f"{len(data)} bytes, more than any object the store writes")
        try:
            decoded = cls._decoded(data)
        except ValidationError as error:
            raise CorruptObjectError(location, key, _reason(cls, data, error)) from None
        if decoded.hash != decoded.body_digest():
            raise CorruptObjectError(location, key, "its content does not match its hash")
        if decoded.encode() != data:
            raise CorruptObjectError(location, key, "not in the canonical form the store writes")
        if key_seq(key) != decoded.seq:
            raise CorruptObjectError(location, key, "it holds another seq than its key names")
        return decoded

    @classmethod
    async def read(cls, location: str, key: str, data: bytes) -> Self:
        """`decode`, in a worker thread when the object is large."""
        return await off_loop(len(data), functools.partial(cls.decode, location, key, data))

    @classmethod
    def _decoded(cls, data: bytes) -> Self:
        return cls.model_validate_json(data, strict=True)


class Commit(_Signed):
    """One committed step: its seq, a random id (to recognise our own PUT), and the hash chain.
    Its format is 2 exactly when it carries an edit."""

    kind: Literal["commit"] = "commit"
    format: Literal[1, 2] = 1
    id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    time: Time
    origin: WireOrigin
    prev: Hash
    changes: tuple[Change, ...]

    @classmethod
    def create(cls, seq: int, prev: str, changes: tuple[Change, ...], origin: Origin, *, at: float) -> Commit:
        """A new commit made at `at` (seconds since the epoch, by the server's clock)."""
        time = time_text(at)
        fmt = EDIT_FORMAT if any(isinstance(change, Edit) for change in changes) else FORMAT
        return cls.signed(
            seq=seq, format=fmt, id=secrets.token_hex(16), time=time, origin=origin, prev=prev, changes=changes
        )

    @model_validator(mode="after")
    def _format_names_edits(self) -> Self:
        if (self.format == EDIT_FORMAT) != any(isinstance(change, Edit) for change in self.changes):
            raise ValueError("a commit is of format 2 exactly when it carries an edit")
        return self

    @property
    def moment(self) -> datetime:
        """When the commit was made: by the server's clock as the writer knew it, never before the
        commit it follows (writers of the first release used their own clocks)."""
        return moment_of(self.time)

    @property
    def size(self) -> int:
        """Bytes of the texts this commit writes, edited ones whole, which the checkpoint policy
        counts: checkpoints then come as often as without edits, and a cold start reads as few
        commits (edits save the bytes of every commit, not the requests of a cold start)."""
        return sum(
            len(change.text.encode()) if isinstance(change, Write) else change.size
            for change in self.changes
            if isinstance(change, Write | Edit)
        )


def stored_size(text: str) -> int:
    """Bytes a file's text takes in a commit or a checkpoint: its UTF-8, with JSON's escapes
    (two bytes for a quote, a backslash and \\n-style escapes, six for other control characters)."""
    return stored_size_of(text.encode())


def stored_size_of(data: bytes) -> int:
    """`stored_size` of the text whose UTF-8 is `data`."""
    # Counted by deleting the escaped bytes, twice as fast as encoding the JSON.
    escaped = len(data) - len(data.translate(None, _ESCAPED))
    if not escaped:
        return len(data)
    short = len(data) - len(data.translate(None, _SHORT_ESCAPED))
    return len(data) + short + 5 * (escaped - short)


def text_bytes(changes: Iterable[Change]) -> int:
    """Bytes of text the changes carry."""
    return sum(
        len(change.text.encode()) if isinstance(change, Write) else len(change.inserted.encode())
        for change in changes
        if isinstance(change, Write | Edit)
    )


async def off_loop[T](size: int, work: Callable[[], T]) -> T:
    """Run `work` (encoding or decoding `size` bytes) here when small, else in a worker thread."""
    if size < OFF_LOOP_BYTES:
        return work()
    return await asyncio.to_thread(work)


class Checkpoint(_Signed):
    """The whole state as of commit `seq`: live files with their versions, and the tombstones the
    change feed needs. `genesis` (the hash of commit 1) names the memory; checkpoints of the first
    release lack it. `descriptions` are the files' descriptions, in the order of `files`, as the
    harness's `describe` made them under the `FileFormat` limits `described_with` names
    (max_file_bytes, frontmatter_bytes, description_chars), so that a cold start need not parse
    every file's frontmatter again; older checkpoints lack both."""

    kind: Literal["checkpoint"] = "checkpoint"
    format: Literal[1] = 1
    head_hash: Hash
    floor: Seq
    time: Time
    files: tuple[tuple[WirePath, str, Seq], ...]
    deleted: tuple[tuple[WirePath, Seq], ...]
    _written_when_set = frozenset({"genesis", "descriptions", "described_with"})
    genesis: Hash | None = None
    descriptions: tuple[str | None, ...] | None = None
    described_with: tuple[int, int, int] | None = None


def time_text(seconds: float) -> str:
    """A moment as commits and checkpoints record it (milliseconds, UTC)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def moment_of(time: str) -> datetime:
    """The moment a time recorded by `time_text` names."""
    return datetime.fromisoformat(time)


def _reason(model: type[_Signed], data: bytes, error: ValidationError) -> str:
    """Why an object failed to decode, in the words an operator needs."""
    try:
        parsed = pydantic_core.from_json(data)
    except ValueError:
        return "not a JSON document the store writes (truncated, overwritten or nested too deep?)"
    kind = model.model_fields["kind"].default
    if not isinstance(parsed, dict) or parsed.get("kind") != kind:
        return f"not a bucket-memory {kind}"
    readable = (FORMAT, EDIT_FORMAT) if kind == "commit" else (FORMAT,)
    if parsed.get("format") not in readable:
        return f"format {parsed.get('format')!r}; this bucket-memory reads format {readable[-1]} (upgrade it?)"
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"malformed {kind}: {where}: {first['msg']}"
