"""What the run's actors were told, which the auditors hold the memory to.

The ledger is the simulation's model: each acknowledged change (path, text, version), each erasure
the operator saw done (and the texts it promised to remove), each verdict a reader once observed,
and the step trace that a failing seed prints.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from .lineage import Lineage


@dataclass(frozen=True, slots=True)
class Ack:
    """A change a writer was told is done: `text` at `path` as of commit `version` (None: a delete).
    `expected` is the version the change was made over (None: a create); a move of the file at
    `source` (version `expected`) to `path` carries its `text` there."""

    path: str
    text: str | None
    version: int
    actor: str
    step: int
    expected: int | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Erased:
    """An erasure the operator was told is done: its commit and every text the path held below it."""

    path: str
    seq: int
    texts: frozenset[str]
    step: int
    followed: bool = True  # whether `texts` has the file's texts under its other names yet
    beyond: frozenset[str] = frozenset()  # texts of the file the store no longer links to it


@dataclass
class Ledger:
    """The run's record of promises: acknowledged changes, done erasures, observed verdicts,
    exports and the moments each step ended at."""

    acks: list[Ack] = field(default_factory=list)
    erased: list[Erased] = field(default_factory=list)
    erasing: dict[str, int] = field(default_factory=dict)  # path -> the last step an erase of it began
    verdicts: dict[tuple[int, str], str] = field(default_factory=dict)  # (seq, hash) -> "valid" or the void reason
    exports: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # (step, files) of each export
    moments: list[tuple[int, float]] = field(default_factory=list)  # (step, virtual time) each step ended at
    trace: list[str] = field(default_factory=list)
    reapplied: dict[int, list[int]] = field(default_factory=dict)  # seq -> where recover re-applied a fork there
    leaks: list[str] = field(default_factory=list)  # failures that reached a caller unmapped
    moving: bool = False  # writers move files: a text may live under names its acks never gave
    copied: list[int] = field(default_factory=list)  # steps of operator commands that write old texts anew

    def note(self, step: int, line: str) -> None:
        self.trace.append(f"{step:4d} {line}")

    def acked(self, ack: Ack) -> None:
        self.acks.append(ack)

    def erasure_done(self, path: str, seq: int, step: int) -> None:
        """The texts an erasure of `path` at commit `seq` must remove: every text acknowledged at
        the path below it (a write unconfirmed then may land on either side of it); where files
        move, `follow_moves` adds the texts of the files that had the path as a name."""
        texts = frozenset(ack.text for ack in self.acks if ack.path == path and ack.text and ack.version < seq)
        self.erased.append(Erased(path, seq, texts, step, followed=not self.moving))

    def follow_moves(self, base: int) -> None:
        """Add to each erasure not yet followed the texts of every file the ledger saw have its path
        as a name (the store's promise: it erases each file that had the name). Those it reached
        only through a move at or below `base`, its retained log's base, go to `beyond`: below the
        base the store knows a file by its path alone, and leaves the texts it had under earlier
        names in the objects that hold them there (`erased-moved`, a defect not fixed yet)."""
        for index, erasure in enumerate(self.erased):
            if erasure.followed:
                continue
            acks = [ack for ack in self.acks if ack.step <= erasure.step]
            # A text a move at or below the base carried lives on under a name the store does not
            # link to the other (whichever of the two is erased).
            carried = {ack.text for ack in acks if ack.source is not None and ack.version <= base}
            texts = Lineage(acks, since=base).texts(erasure.path, erasure.seq) - carried
            beyond = (erasure.texts | Lineage(acks).texts(erasure.path, erasure.seq)) - texts
            # A move carries whatever the file held: an agent's forged text, say, which it may
            # write again (seed 1612). Only the writers' own texts are the ledger's to follow.
            written = {ack.text for ack in acks if ack.source is None}
            texts, beyond = texts & written, beyond & written
            self.erased[index] = replace(
                erasure, texts=self._kept(texts, erasure.step), beyond=self._kept(beyond, erasure.step), followed=True
            )

    def erased_texts(self) -> set[str]:
        return {text for erasure in self.erased for text in erasure.texts}

    def erased_beyond(self) -> set[str]:
        """The texts erasures promise that the store cannot follow yet (see `follow_moves`)."""
        return {text for erasure in self.erased for text in erasure.beyond} - self.erased_texts()

    def _kept(self, texts: AbstractSet[str], step: int) -> frozenset[str]:
        # An operator's restore, import or rollback writes an old text anew, perhaps at a name the
        # erased file never had: another file, which `erase` of this one leaves alone.
        return frozenset(text for text in texts if not self._copied_since(text, step))

    def erased_below(self, ack: Ack, found: list[tuple[int, str]] = []) -> bool:  # noqa: B006
        """Whether an erasure the operator ran removes acknowledged write `ack`: one reported done,
        or one `found` in the log where the operator began to erase the path after the write (a
        killed erase still erased). An erasure that no erase begun since accounts for is no excuse:
        recover committed one of a file written after the erasure it finished (seed 303)."""
        done = [(erasure.seq, erasure.path) for erasure in self.erased]
        found = [(seq, path) for seq, path in found if self.erasing.get(path, -1) >= ack.step]
        # `erase` of a path erases each file that had it as a name: a file the ledger saw move, by
        # any; one whose history it did not see whole, by whichever.
        names = Lineage(self.acks).names(ack) if self.moving else {ack.path}
        return any((names is None or erased in names) and seq > ack.version for seq, erased in [*done, *found])

    def _copied_since(self, text: str, step: int) -> bool:
        """Whether an operator's command that writes old texts anew ran between `text`'s write and `step`."""
        written = min(ack.step for ack in self.acks if ack.text == text)
        return any(written <= copied <= step for copied in self.copied)

    def moved(self, reapplied: tuple[tuple[int, int | None], ...]) -> None:
        """`recover` re-applied the commits of a fork at new seqs: an acknowledged write may now live
        at the new seq (when the fork was its writer's) or still at its own (when the fork was a
        forgery over it, and recover put the writer's commit back)."""
        for old, new in reapplied:
            if new is not None:
                self.reapplied.setdefault(old, []).append(new)
