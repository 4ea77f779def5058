"""The changes a commit carries (write, edit, delete, move, purge, erase) and the intents it settles,
as strict models: the body of the on-disk format, which `codec` signs and chains.

A text is sealed (`Sealed`): from format 3 on, a commit's hash covers a salted digest of each
text rather than the text, so that an erasure can remove the text and the chain still checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_validator
from pydantic import model_serializer as _model_serializer

from .canonical_json import canonical
from .wire_values import MAX_OBJECT_BYTES, Hash, Salt, Seq, WireOrigin, WirePath


class Wire(BaseModel):
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


class _Change(Wire):
    """A change's `origin` is set when a group commit carries changes of several callers: it names
    the caller of that change, where the commit's own origin names the first."""

    _written_when_set = frozenset({"origin"})
    origin: WireOrigin | None = None


class Sealed(_Change):
    """A change that carries text. In a commit of format 3 the text comes with a random `salt`, and
    the commit's hash covers `sealed`, the SHA-256 of the salt and the text, in its place: erasing
    drops the text and the salt, keeps `sealed` and names the erasure commit in `erased`, and the
    chain still checks. An erased change of formats 1 and 2 has only `erased`: its commit's hash
    can no longer be checked (`Commit.checkable`)."""

    _written_when_set = frozenset({"origin", "salt", "sealed", "erased"})
    _texts: ClassVar[tuple[str, ...]] = ()
    salt: Salt | None = None
    sealed: Hash | None = None
    erased: Seq | None = None

    @property
    def is_erased(self) -> bool:
        return self.erased is not None

    def seal(self) -> str:
        """The digest the commit's hash covers in place of this change's text."""
        if self.sealed is not None:
            return self.sealed
        assert self.salt is not None, "only a salted text is sealed"
        return hashlib.sha256(bytes.fromhex(self.salt) + self._content()).hexdigest()

    def _content(self) -> bytes:
        raise NotImplementedError

    def redacted(self, erasure: int) -> Self:
        """This change with its text erased by commit `erasure`: the sealed digest kept when it has one."""
        sealed = self.seal() if self.salt is not None or self.sealed is not None else None
        blank = dict.fromkeys(self._texts)
        return self.model_copy(update={**blank, "salt": None, "sealed": sealed, "erased": erasure})

    @model_validator(mode="after")
    def _text_or_erased(self) -> Self:
        texts = [getattr(self, name) for name in self._texts]
        if self.erased is None and (None in texts or self.sealed is not None):
            raise ValueError("a change carries its text, or is erased")
        if self.erased is not None and (any(text is not None for text in texts) or self.salt is not None):
            raise ValueError("an erased change carries no text and no salt")
        return self


class Write(Sealed):
    __match_args__ = ("path", "text")
    op: Literal["write"] = "write"
    path: WirePath
    _written_when_set = Sealed._written_when_set | {"text"}
    _texts = ("text",)
    text: str | None = None

    def _content(self) -> bytes:
        assert self.text is not None
        return self.text.encode()


class Edit(Sealed):
    """A write of a file that exists as the one span it changes (see `delta`): `removed` at code
    point `at` becomes `inserted`, and the text is then `size` bytes of UTF-8. Commits that carry
    one are of format 2 (or 3)."""

    __match_args__ = ("path", "at", "removed", "inserted")
    op: Literal["edit"] = "edit"
    path: WirePath
    at: Annotated[int, Field(ge=0, le=MAX_OBJECT_BYTES)]
    _written_when_set = Sealed._written_when_set | {"removed", "inserted"}
    _texts = ("removed", "inserted")
    removed: str | None = None
    inserted: str | None = None
    size: Annotated[int, Field(ge=0, le=MAX_OBJECT_BYTES)]

    def _content(self) -> bytes:
        return canonical([self.removed, self.inserted])


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


class Erase(_Change):
    """The erasure of every text a file ever had (`erasure.py`): deletes `path` if it is live, and
    names in the log which file was erased; the commit's origin names who erased it and its time
    when. Commits that carry one are of format 3. `unchecked` vouches for the commits of formats 1
    and 2 whose texts it erases, whose hashes then no longer check their content: each one's seq
    with the SHA-256 of its body once erased, which `verify` holds them to."""

    __match_args__ = ("path",)
    op: Literal["erase"] = "erase"
    path: WirePath
    _written_when_set = frozenset({"origin", "unchecked"})
    unchecked: tuple[tuple[Seq, Hash], ...] | None = None


type Change = Annotated[Write | Edit | Delete | Move | Purge | Erase, Field(discriminator="op")]


type FoldOutcome = Literal["applied", "unchanged", "refused"]
type IntentId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
# The intents the last commits before a checkpoint settled, each with the seq that did (`folds`).
type SettledIntents = tuple[tuple[IntentId, Seq], ...]


class Fold(Wire):
    """An intent (`intents.Intent`, another process's write) that a commit settles, and how: its
    changes are in the commit (`applied`, each with the intent's origin), it changed nothing
    (`unchanged`: the file stays at `version`), or its checks refused it (`refused`, with the
    harness's error `code`). `base` is the head its author saw: a commit may settle an intent only
    within `folds.FOLD_WINDOW` commits after it, and only once. `intent` is the intent's hash: an
    author takes a record as its own only if it names the intent it published (another intent
    with its id, a copy an attacker swapped in, settles nothing of its author's)."""

    _written_when_set = frozenset({"code", "version"})
    id: IntentId
    intent: Hash
    base: Seq
    outcome: FoldOutcome
    code: Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")] | None = None
    version: Seq | None = None

    @model_validator(mode="after")
    def _says_what_it_needs(self) -> Self:
        if (self.outcome == "refused") != (self.code is not None):
            raise ValueError("a refused intent names its error's code, and only a refused one")
        if (self.outcome == "unchanged") != (self.version is not None):
            raise ValueError("an unchanged intent names the file's version, and only an unchanged one")
        return self


def text_bytes(changes: Iterable[Change]) -> int:
    """Bytes of text the changes carry."""
    return sum(len(_carried(change).encode()) for change in changes if isinstance(change, Write | Edit))


def _carried(change: Write | Edit) -> str:
    """The text a change carries (none once erased)."""
    return (change.text if isinstance(change, Write) else change.inserted) or ""


def sealed_form(change: Change) -> dict[str, Any]:
    """A change as the hash of a commit of format 3 covers it: a text as its sealed digest."""
    encoded: dict[str, Any] = change.model_dump(mode="json", by_alias=True)
    if isinstance(change, Sealed):
        for name in (*change._texts, "salt", "erased"):
            encoded.pop(name, None)
        encoded["sealed"] = change.seal()
    return encoded
