"""The signed envelope of the on-disk format: commits and checkpoints as strict models, and their hash
(the changes they carry are `changes`).

A memory owns its commits (`log/<20 digits>.json`) and checkpoints (`checkpoints/<20 digits>.json`)
under its prefix, and beside them runs (`log/<20 digits>.run.json`), intents (`pending/`) and
erasure records (`erasures/`): `wire_values` names every key, and checks each value these models
hold. Every object is canonical JSON (sorted keys, UTF-8, no spaces) whose `hash` is the SHA-256 of
the rest. Decoding treats the bytes as hostile: size, nesting depth and numbers are bounded by the
parser, every field is checked by a strict model, paths obey the harness's path rules, and the
object must be exactly the bytes a writer encoded, proven by encoding it again (a checkpoint only
served to a cold open is taken on its hash over the bytes read: see `decode`).
Encoding runs the same decoder over its own output before anything is written, so no writer can
commit an object that readers refuse. `tests/golden/` pins the format of the first release byte
for byte.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import typing
from collections.abc import Callable, Collection
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, Self

import pydantic_core
from a13n_harness.providers.memory import MemoryStoreError, Origin
from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from ..runtime.off_loop import off_loop
from .canonical_json import canonical_members, joined
from .changes import Change, Edit, Erase, Fold, Sealed, SettledIntents, Wire, Write, sealed_form
from .checkpoint_content import CheckpointContent
from .decoded import DECODED
from .tombstone import DESTROYED, FORGED
from .wire_values import (
    MAX_OBJECT_BYTES,
    Hash,
    Seq,
    Time,
    WireOrigin,
    WirePathRows,
    key_seq,
    moment_of,
    time_text,
)

FORMAT = 1
# Commits that carry an edit: readers of format 1 only refuse them with a message to upgrade.
EDIT_FORMAT = 2
# Commits whose hash covers a salted digest of each text, not the text (see `Sealed`): a text can be
# erased and the chain still checks. Readers of formats 1 and 2 only refuse them with a message to upgrade.
SEALED_FORMAT = 3
# Commits that settle intents (`Fold`): sealed as format 3, and readers of formats 1 to 3 refuse them
# with a message to upgrade.
FOLDING_FORMAT = 4
GENESIS_HASH = "0" * 64
MAX_VOID_CHARS = 512
type VoidNote = Annotated[str, Field(min_length=1, max_length=MAX_VOID_CHARS)]


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


class OffChain(CorruptObjectError):
    """A commit that does not follow the state it was applied to in the hash chain: forged, or the
    log under that state was replaced since it was loaded (`recover` put the chain back)."""


class _Unsound(Exception):
    """Why bytes are not an object a writer made (`_Signed._checked`), its one argument."""


class _Signed(Wire):
    """An object whose `hash` covers the canonical encoding of every other field, stored at the one
    key `stored_at` accepts: the key its `seq` names for a commit or a checkpoint; runs, intents and
    erasure records name their own."""

    seq: Seq
    hash: Hash
    # Whether `hash` covers the bytes as stored, less the `hash` member (see `hashed_as_read`).
    _hash_covers_bytes: ClassVar[bool] = False
    # Whether one decoded object serves every reader of the same bytes in the process (`decode`).
    _shared: ClassVar[bool] = False

    @property
    def checkable(self) -> bool:
        """Whether the hash can be checked against the content (not after an erasure in an old format)."""
        return True

    def encode(self) -> bytes:
        return joined(self._members.values())

    @property
    def encoded_size(self) -> int:
        """The length of `encode()`, known without joining it: the members, a comma between each
        two, and the braces."""
        return sum(map(len, self._members.values())) + len(self._members) + 1

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
        made = unsigned._resigned(unsigned.body_digest())
        # Hashed as readers check it and proven to decode from its bytes: what every reader in the
        # process decodes them to, so none need to (a fleet's stores read each other's commits).
        if cls._shared and made.refused() is None:
            DECODED.keep(cls, made.encode(), made)
        return made

    def _resigned(self, hashed: str) -> Self:
        """This object with `hash` set to `hashed`, proven to decode back to itself."""
        members = dict(self._members)
        members["hash"] = canonical_members({"hash": hashed})["hash"]
        made = self.model_copy(update={"hash": hashed})
        # The members just made are the new object's encoding: kept so that writing it encodes
        # nothing again (a cached encoding of the original must not be carried along).
        made.__dict__["_members"] = members
        encoded = made.encode()
        if len(encoded) > MAX_OBJECT_BYTES or type(self)._decoded(encoded) != made:
            raise MemoryStoreError(
                "too_large", f"This change would make an object readers refuse ({len(encoded)} bytes)."
            )
        return made

    @classmethod
    def decode(cls, location: str, key: str, data: bytes, *, served: bool = False) -> Self:
        """The object in `data`, read from `key`, or `CorruptObjectError` naming what is wrong with it.

        `served`: only its parsed content will be used (a cold open), so bytes that hash as read
        need not be proven canonical too. Whoever can write the bucket can craft such bytes (a
        duplicate member the parser drops, spaces); `verify`, erasure and recovery reason about the
        bytes as stored, so they prove the form. Types that set `_shared` are decoded once a process
        (`decoded.DECODED`, keyed by the bytes); each reader checks the key."""
        if len(data) > MAX_OBJECT_BYTES:
            raise CorruptObjectError(location, key, f"{len(data)} bytes, more than any object the store writes")
        if data == DESTROYED:  # the reader that read it has found no proof (`LogReader.read_commit`)
            raise CorruptObjectError(location, key, FORGED)
        try:
            if cls._shared and not served:
                decoded = DECODED.once(cls, data, lambda: cls._checked(data, served=False))
            else:
                decoded = cls._checked(data, served=served)
        except _Unsound as unsound:
            raise CorruptObjectError(location, key, unsound.args[0]) from None
        if not decoded.stored_at(key):
            raise CorruptObjectError(location, key, "it holds another seq than its key names")
        return decoded

    @classmethod
    def _checked(cls, data: bytes, *, served: bool) -> Self:
        """The object in `data` with its hash and form checked as `decode` says, whatever key it was
        read from: a pure function of the bytes. `_Unsound` names what is wrong."""
        try:
            decoded = cls._served(data) if served else cls._decoded(data)
        except ValueError as error:  # pydantic's ValidationError among them
            raise _Unsound(_reason(cls, data, error)) from None
        if served and decoded.hashed_as_read(data):
            pass
        elif decoded.checkable and decoded.hash != decoded.body_digest():
            raise _Unsound("its content does not match its hash")
        elif decoded.encode() != data:
            raise _Unsound("not in the canonical form the store writes")
        if (refused := decoded.refused()) is not None:
            raise _Unsound(refused)
        return decoded

    def refused(self) -> str | None:
        """What a reader refuses in this object although it decodes and hashes; None for most types."""
        return None

    def stored_at(self, key: str) -> bool:
        """Whether `key` is the one a writer stores this object at."""
        return key_seq(key) == self.seq

    def hashed_as_read(self, data: bytes) -> bool:
        """Whether the bytes read, less their `hash` member, hash to `hash`: for content that is only
        served, proof enough that it is what was hashed, so `decode` need not encode it again. Only
        where the hash covers the stored bytes (not the sealed texts of a commit of format 3)."""
        if not self._hash_covers_bytes:
            return False
        # Canonical JSON sorts `hash` after other members, never first, and an unescaped quote
        # cannot occur inside a string, so the first match is the object's own member. Encoding a
        # large checkpoint again was two thirds of a cold open's CPU; hashing the bytes read is a twentieth.
        member = b',"hash":"' + self.hash.encode() + b'"'
        at = data.find(member)
        if at < 0:
            return False
        hashed = hashlib.sha256(memoryview(data)[:at])
        hashed.update(memoryview(data)[at + len(member) :])
        return hashed.hexdigest() == self.hash

    @classmethod
    async def read(cls, location: str, key: str, data: bytes) -> Self:
        """`decode`, in a worker thread when the object is large."""
        return await off_loop(len(data), functools.partial(cls.decode, location, key, data))

    @classmethod
    def _decoded(cls, data: bytes) -> Self:
        return cls.model_validate_json(data, strict=True)

    @classmethod
    def _served(cls, data: bytes) -> Self:
        # Parsing first and validating the parsed values takes half the CPU of strict JSON
        # validation, which pydantic does item by item (a third of a cold open). The lax mode this
        # needs (JSON arrays for tuples) also takes a few mistyped values, such as "5" for 5, as
        # what they spell: still every constraint checked, and served only if the bytes hash as
        # read, so no more than whoever wrote the hash could have written typed; `verify`, which
        # decodes strictly, reports them.
        return cls.model_validate(pydantic_core.from_json(data, cache_strings="keys"), strict=False)


class Commit(_Signed):
    """One committed step: its seq, a random id (to recognise our own PUT), and the hash chain.
    Format 1 carries whole texts; 2, edits too; 3 seals each text (`Sealed`), so that it can be
    erased with the chain intact, and may carry erasures; 4 is 3 settling intents (`folded`)."""

    _written_when_set = frozenset({"folded", "void"})
    _shared = True
    kind: Literal["commit"] = "commit"
    format: Literal[1, 2, 3, 4] = 1
    id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    time: Time
    origin: WireOrigin
    prev: Hash
    changes: tuple[Change, ...]
    folded: tuple[Fold, ...] | None = None
    # Outside the hash, as an erased text is: the verdict of a void commit, recorded by the erasure
    # that removed a text it was checked against (`recorded_void`), so that it stays void.
    void: VoidNote | None = None

    @classmethod
    def create(
        cls,
        seq: int,
        prev: str,
        changes: tuple[Change, ...],
        origin: Origin,
        *,
        at: float,
        sealed: bool = True,
        folded: tuple[Fold, ...] = (),
    ) -> Commit:
        """A new commit made at `at` (seconds since the epoch, by the server's clock); with `sealed`
        (always when it erases or settles intents), of format 3 or 4, each text under a salt of its own."""
        time = time_text(at)
        if sealed or folded or any(isinstance(change, Erase) for change in changes):
            fmt = FOLDING_FORMAT if folded else SEALED_FORMAT
            changes = tuple(
                change.model_copy(update={"salt": secrets.token_hex(16)}) if isinstance(change, Sealed) else change
                for change in changes
            )
        else:
            fmt = EDIT_FORMAT if any(isinstance(change, Edit) for change in changes) else FORMAT
        return cls.signed(
            seq=seq,
            format=fmt,
            id=secrets.token_hex(16),
            time=time,
            origin=origin,
            prev=prev,
            changes=changes,
            folded=folded or None,
        )

    @property
    def sealed(self) -> bool:
        """Whether each text is sealed under a salt (formats 3 and 4)."""
        return self.format >= SEALED_FORMAT

    @model_validator(mode="after")
    def _format_names_its_changes(self) -> Self:
        texts = [change for change in self.changes if isinstance(change, Sealed)]
        if (self.format == FOLDING_FORMAT) != bool(self.folded):
            raise ValueError("a commit is of format 4 exactly when it settles intents")
        if len({fold.id for fold in self.folded or ()}) != len(self.folded or ()):
            raise ValueError("a commit settles each intent once")
        if self.sealed:
            if any(change.salt is None and change.sealed is None for change in texts):
                raise ValueError("every text of a commit of format 3 is sealed")
            return self
        if any(change.salt or change.sealed for change in texts) or any(
            isinstance(change, Erase) for change in self.changes
        ):
            raise ValueError("only a commit of format 3 erases or seals texts")
        if (self.format == EDIT_FORMAT) != any(isinstance(change, Edit) for change in self.changes):
            raise ValueError("a commit of format 1 or 2 is of format 2 exactly when it carries an edit")
        return self

    @property
    def checkable(self) -> bool:
        return self.sealed or not any(isinstance(change, Sealed) and change.is_erased for change in self.changes)

    def body_digest(self) -> str:
        members = {name: member for name, member in self._members.items() if name not in ("hash", "void")}
        if self.sealed:
            sealed = [sealed_form(change) for change in self.changes]
            members["changes"] = canonical_members({"changes": sealed})["changes"]
        return hashlib.sha256(joined(members.values())).hexdigest()

    @property
    def erasure_authorized(self) -> bool | None:
        """Whether an operator's record makes this commit's `erase` changes an erasure
        (`erasure_record`): set by whoever read the commit from a bucket (`authorize`); None until
        then. A commit that erases nothing needs no record (True)."""
        if not any(isinstance(change, Erase) for change in self.changes):
            return True
        verdict = self.__dict__.get("_erasure_authorized")
        return verdict if isinstance(verdict, bool) else None

    def authorize(self, authorized: bool) -> Self:
        """This commit noted with what the operator's records say of its erasure (outside the
        model's fields: a fact about the bucket, not part of the object). A copy, when it erases:
        the decoded commit is shared by every reader in the process (`decode`), of any bucket."""
        if self.erasure_authorized is authorized:
            return self
        made = self.model_copy()
        made.__dict__["_erasure_authorized"] = authorized
        return made

    def recorded_void(self, reason: str) -> Commit:
        """This commit with its verdict, void for `reason`, recorded outside the hash."""
        if self.void is not None:
            return self
        made = self.model_copy(update={"void": reason[:MAX_VOID_CHARS]})
        made.__dict__.pop("_members", None)
        return made._resigned(self.hash)

    def redacted(self, erase: Callable[[int, Change], bool], erasure: int, remark: Collection[int] = ()) -> Commit:
        """This commit with the texts of the changes `erase` names (by index) erased by commit
        `erasure`. Of format 3 its hash still checks; of formats 1 and 2 it can no longer be checked.
        The erased changes at `remark` come to name `erasure` too (format 3 only: the hash leaves the
        mark out, where an old format's vouched digest covers it)."""
        remark = remark if self.sealed else ()
        changes = tuple(
            change.redacted(erasure)
            if isinstance(change, Sealed) and not change.is_erased and erase(index, change)
            else change.model_copy(update={"erased": erasure})
            if isinstance(change, Sealed) and change.is_erased and index in remark
            else change
            for index, change in enumerate(self.changes)
        )
        if changes == self.changes:
            return self
        made = self.model_copy(update={"changes": changes})
        made.__dict__.pop("_members", None)
        redacted = made._resigned(self.hash)
        if redacted.checkable and redacted.body_digest() != self.hash:
            raise AssertionError("erasing a sealed text keeps the commit's hash")
        return redacted

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
            len((change.text or "").encode()) if isinstance(change, Write) else change.size
            for change in self.changes
            if isinstance(change, Write | Edit)
        )


class Checkpoint(_Signed):
    """The whole state as of commit `seq`: live files with their versions, and the tombstones the
    change feed needs. `genesis` (the hash of commit 1) names the memory; checkpoints of the first
    release lack it. `descriptions` are the files' descriptions, in the order of `files`, as the
    harness's `describe` made them under the `FileFormat` limits `described_with` names
    (max_file_bytes, frontmatter_bytes, description_chars), so that a cold start need not parse
    every file's frontmatter again; older checkpoints lack both. A file whose text was erased has
    none (and no description), and `erased` names the erasure commit of each such file: such a
    checkpoint is of format 2."""

    kind: Literal["checkpoint"] = "checkpoint"
    format: Literal[1, 2] = 1
    head_hash: Hash
    floor: Seq
    time: Time
    files: WirePathRows[tuple[str, str | None, Seq]]
    deleted: WirePathRows[tuple[str, Seq]]
    _written_when_set = frozenset({"genesis", "descriptions", "described_with", "erased", "folds"})
    genesis: Hash | None = None
    descriptions: tuple[str | None, ...] | None = None
    described_with: tuple[int, int, int] | None = None
    erased: WirePathRows[tuple[str, Seq]] | None = None
    folds: SettledIntents | None = None

    @model_validator(mode="after")
    def _erased_files_named(self) -> Self:
        without_text = {path for path, text, _ in self.files if text is None}
        named = {path for path, _ in self.erased or ()}
        if without_text != named or len(named) != len(self.erased or ()):
            raise ValueError("exactly the files without text are named in `erased`, once each")
        if (self.format == 2) != bool(self.erased):
            raise ValueError("a checkpoint is of format 2 exactly when it holds an erased file")
        return self

    _hash_covers_bytes = True

    def content(self) -> CheckpointContent:
        """What it holds, as `State.checkpoint_content` gives it and `redacted_content` takes it."""
        return CheckpointContent._make(getattr(self, name) for name in CheckpointContent._fields)

    @classmethod
    def made(cls, content: CheckpointContent) -> Checkpoint:
        """A new checkpoint holding `content`, signed (of format 2 when it holds an erased file)."""
        return cls.signed(**content._asdict(), format=2 if content.erased else 1)


def _reason(model: type[_Signed], data: bytes, error: ValueError) -> str:
    """Why an object failed to decode, in the words an operator needs."""
    try:
        parsed = pydantic_core.from_json(data)
    except ValueError:
        return "not a JSON document the store writes (truncated, overwritten or nested too deep?)"
    kind = model.model_fields["kind"].default
    if not isinstance(parsed, dict) or parsed.get("kind") != kind:
        return f"not a bucket-memory {kind}"
    readable = typing.get_args(model.model_fields["format"].annotation)
    if parsed.get("format") not in readable:
        return f"format {parsed.get('format')!r}; this bucket-memory reads format {readable[-1]} (upgrade it?)"
    if not isinstance(error, ValidationError):
        return f"malformed {kind}: {error}"
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"malformed {kind}: {where}: {first['msg']}"
