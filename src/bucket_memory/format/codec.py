"""Commits and checkpoints: the log's steps and the whole state as of one, each a `signed.Signed`
object (the changes they carry are `changes`).

A memory owns its commits (`log/<20 digits>.json`) and checkpoints (`checkpoints/<20 digits>.json`)
under its prefix, and beside them runs (`log/<20 digits>.run.json`), intents (`pending/`) and
erasure records (`erasures/`): `wire_values` names every key, and checks each value these models
hold. Every object is canonical JSON (sorted keys, UTF-8, no spaces) whose `hash` is the SHA-256 of
the rest, decoded as hostile input (`signed`); paths obey the harness's path rules.
`tests/golden/` pins the format of the first release byte for byte.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Annotated, Literal, Self

from a13n_harness.providers.memory import Origin
from pydantic import Field, model_validator

from .canonical_json import canonical_members, joined
from .changes import Change, Edit, Erase, Fold, Sealed, SettledIntents, Write, sealed_form
from .checkpoint_content import CheckpointContent
from .signed import CorruptObjectError, Signed
from .wire_values import Hash, Seq, Time, WireOrigin, WirePathRows, moment_of, time_text

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


class OffChain(CorruptObjectError):
    """A commit that does not follow the state it was applied to in the hash chain: forged, or the
    log under that state was replaced since it was loaded (`recover` put the chain back)."""


class Commit(Signed):
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


class Checkpoint(Signed):
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
