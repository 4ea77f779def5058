"""Runs: the recent commits packed into one object, so that catching up costs a few GETs, not one a commit.

In a fleet, every process is behind by the commits the others made since it last looked: dozens
at fleet rates, and a GET each is what first exceeds S3's request rate per prefix. The writer of
every commit whose seq is a multiple of `RUN_EVERY` also stores `runs/<seq>.json`: the commits up
to it that it holds (at most `RUN_COMMITS`, and `RUN_BYTES` of them). A reader `RUN_EVERY` or more
commits behind reads the newest run reaching back to its head and the commits from the run's seq
on, in one round trip: at most `RUN_EVERY + 1` GETs whatever the distance.

A run is a copy, never the record: a reader applies its commits through the same hash chain, and
trusts them only because the log's own object at the run's seq, read in the same round trip,
holds the same commit (its hash covers every commit before it). A run that is missing, damaged,
too short or another memory's is passed over, and the commits are read one by one (invariant 10
of `log`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal, Self

from pydantic import model_validator

from ..format.codec import Commit, CorruptObjectError, _Signed
from ..format.wire_values import run_key

RUN_EVERY = 4
RUN_COMMITS = 32
RUN_BYTES = 4 * 1024 * 1024


class Run(_Signed):
    """Commits `seq - len(commits) + 1` to `seq`, in order and chained, as the log holds them."""

    kind: Literal["run"] = "run"
    format: Literal[1] = 1
    commits: tuple[Commit, ...]

    @model_validator(mode="after")
    def _in_order(self) -> Self:
        commits = self.commits
        if not commits or commits[-1].seq != self.seq:
            raise ValueError("a run holds the commits up to its seq")
        if any(
            after.seq != before.seq + 1 or after.prev != before.hash for before, after in itertools.pairwise(commits)
        ):
            raise ValueError("a run's commits follow each other in the hash chain")
        return self

    @property
    def first(self) -> int:
        return self.commits[0].seq

    @classmethod
    def made(cls, commits: Sequence[Commit]) -> Run:
        return cls.signed(seq=commits[-1].seq, commits=commits)

    def stored_at(self, key: str) -> bool:
        return key == run_key(self.seq)


def packable(recent: Sequence[Commit]) -> list[Commit]:
    """The longest run of the newest of `recent` (consecutive, ending at the head) that one run holds."""
    taken: list[Commit] = []
    size = 0
    for commit in reversed(recent[-RUN_COMMITS:]):
        size += commit.encoded_size
        if size > RUN_BYTES or (taken and commit.seq != taken[-1].seq - 1):
            break
        taken.append(commit)
    return taken[::-1]


def read_run(location: str, seq: int, data: bytes) -> Run | None:
    """The run stored for `seq`, or None when it is not one a writer made (passed over, not an
    error): larger than a writer makes one, or holding an erased change (a writer forgets what it
    would pack at an erasure; a sealed commit's hash does not cover `erased`, so a forged run
    could otherwise mark a text erased)."""
    if len(data) > 2 * RUN_BYTES:  # JSON's escapes on top of the commits' own bytes
        return None
    try:
        run = Run.decode(location, run_key(seq), data)
    except CorruptObjectError:
        return None
    if any(not commit.checkable or commit.hash != commit.body_digest() for commit in run.commits):
        return None
    if any(getattr(change, "erased", None) is not None for commit in run.commits for change in commit.changes):
        return None
    return run
