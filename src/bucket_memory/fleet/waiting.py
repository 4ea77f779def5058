"""What an author knows while its intent is pending (`fleet.Fleet` waits on it), and what the
log's record of its intent tells it: settled at a version, or to be planned again (read again from
the log where the head's window names only the seq, or has passed the intent's window)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from a13n_harness.providers.memory import MemoryStoreError

from ..format.changes import Fold
from ..format.codec import Commit
from ..format.wire_values import intent_key_parts
from ..log.reader import LogReader
from ..state.folds import FOLD_WINDOW, live
from .intents import Intent

# Commits that pass an intent by, unsettled, before its author races for the next key itself.
IMPATIENCE = 2
# Polls that find no new commit before an author races for the next key itself.
IDLE_POLLS = 6
# Commits read while waiting that are kept for the fold's catch-up: enough for those after the
# newest run (one every `runs.RUN_EVERY` commits) and a head a few behind, few enough that a fold's
# commits of megabytes each are not held by the dozen.
KEPT_READ = 8
# Create latencies after which an older intent still listed is taken for settled or abandoned: its
# author would have raced for a key itself by then (only who races first depends on it).
GHOST_ROUNDS = 8


@dataclass(frozen=True, slots=True)
class Settled:
    """A commit settled the intent: its write's version (a seq), or the version it left unchanged."""

    version: int | str


@dataclass(frozen=True, slots=True)
class Replan:
    """The intent will never be applied (refused by another's commit, or past its window): plan
    the write again on a current head."""


type Outcome = Settled | Replan


@dataclass(slots=True)
class Waiting:
    """An author's view while its intent is pending: the newest commit seen (`known`, which the
    cached head may be behind), the older intents it knows of, the intents it knows settled,
    the commits it read, and the record that settled its own, once seen."""

    intent: Intent
    known: int
    older: set[str] = field(default_factory=set)
    settled: set[str] = field(default_factory=set)
    mine: tuple[int, Fold] | None = None
    passed: int = 0
    idle: int = 0
    published: asyncio.Task[None] | None = None  # the create of its intent, under way or done
    # The newest commits read while waiting (`KEPT_READ` at most), by seq: a fold's catch-up does not read them again.
    read: dict[int, Commit] = field(default_factory=dict)

    def note(self, commit: Commit, *, void: bool = False) -> None:
        """Take in a commit read while waiting; a void one (applied to the head and found so) settles nothing."""
        self.known = max(self.known, commit.seq)
        self.read[commit.seq] = commit
        if len(self.read) > KEPT_READ:
            del self.read[min(self.read)]
        for fold in () if void else commit.folded or ():
            self.settled.add(fold.id)
            if fold.id == self.intent.id:
                self.mine = (commit.seq, fold)  # whether it names our intent, `outcome_of` tells

    def rank(self, pending: Sequence[str], round_seconds: float) -> None:
        """Take the older intents from a fresh listing of the pending ones: those made lately (one
        listed long after it was made was settled, its deletion not yet seen, or abandoned)."""
        since = int(1000 * (time.time() - GHOST_ROUNDS * round_seconds))
        self.older = {
            key for key in pending if key < self.intent.key and is_live(key, self.known) and _made(key) >= since
        }

    @property
    def first(self) -> bool:
        """Whether no older intent is pending, as far as this author knows."""
        return all(id_of(key) in self.settled for key in self.older)

    @property
    def turn(self) -> bool:
        """Whether to race for the next key now: ours is the oldest, or others had their chance."""
        return self.first or self.passed >= IMPATIENCE or self.idle >= IDLE_POLLS


def outcome_of(seq: int, fold: Fold, intent: Intent) -> Outcome:
    """What commit `seq` settling an intent of our intent's id as `fold` tells its author: nothing
    of ours when the record names another intent (a copy swapped in for ours), which consumed our
    id, so ours can never be settled: plan it again."""
    if fold.intent != intent.hash:
        return Replan()
    match fold.outcome:
        case "applied":
            return Settled(seq)
        case "unchanged":
            return Settled(str(fold.version))
        case _:
            return Replan()


async def past_window(reader: LogReader, settled: Mapping[str, int], intent: Intent) -> Outcome:
    """What became of an intent whose window the head has passed (`settled`: the head's window):
    the head moves by catch-ups, runs and other writes of the process too, so that its author saw
    no settling commit proves nothing; the window's commits are read (a rare path). Only if none
    settled it is it never applied; a window compacted away as it is read proves nothing
    (`unavailable`, which the author reports as unconfirmed)."""
    if (seq := settled.get(intent.id)) is not None:
        return await settled_at(reader, seq, intent)
    window = list(range(intent.base + 1, intent.base + FOLD_WINDOW + 1))
    for commit in await reader.commits_at(window):
        for fold in commit.folded or ():
            if fold.id == intent.id:
                return outcome_of(commit.seq, fold, intent)
    return Replan()


async def settled_at(reader: LogReader, seq: int, intent: Intent) -> Outcome:
    """What commit `seq`, which the head's window says settled an intent of our intent's id, tells
    its author: its record read again (a window, as a cold open loads it, knows only the seq)."""
    commit = await reader.commit(seq)
    fold = next((fold for fold in (commit.folded or ()) if fold.id == intent.id), None) if commit else None
    if fold is None:
        raise MemoryStoreError("unavailable", f"{reader.location}: commit {seq} vanished as it was read; try again.")
    return outcome_of(seq, fold, intent)


def id_of(key: str) -> str:
    parts = intent_key_parts(key)
    return parts[2] if parts is not None else ""


def _made(key: str) -> int:
    parts = intent_key_parts(key)
    return parts[0] if parts is not None else 0


def foldable_after(key: str, head: int) -> bool:
    """Whether the intent at `key` may be settled by commit `head + 1` (`folds.FoldWindow.foldable`):
    of a base a writer can have seen by then, its window not passed."""
    parts = intent_key_parts(key)
    return parts is not None and parts[1] <= head < parts[1] + FOLD_WINDOW


def is_live(key: str, known: int) -> bool:
    """Whether the intent at `key` may still be settled after commit `known` (`folds.live`)."""
    parts = intent_key_parts(key)
    return parts is not None and live(parts[1], known)
