"""Runs: the recent commits packed into one object, so that catching up costs a few GETs, not one a commit.

In a fleet, every process is behind by the commits the others made since it last looked: dozens
at fleet rates, and a GET each is what first exceeds S3's request rate per prefix. With fleet
commit on and other processes seen committing lately, the writer of every commit whose seq is a
multiple of `RUN_EVERY` also stores a run beside it, `log/<seq>.run.json` (`Head.advance` marks it
due, housekeeping writes it): the commits up to it that it holds (at most `RUN_COMMITS`, and
`RUN_BYTES` of them). A reader three or more commits behind the newest run listed reads the runs
that reach back to its head (one a `RUN_COMMITS` commits) and the log's own commits from the
newest run's seq on (fewer than `RUN_EVERY` when every run was written), in one round trip.

A run is a copy, never the record: a reader applies its commits through the same hash chain, and
trusts them only because the log's own object at the run's seq holds the same commit (its hash
covers every commit before it): read in the same round trip, or lately from that key while the
reader waited for its intent (what the key held then, which a reader polling it takes at its word
too: docs/decisions/019-trust-model.md). A run that is missing, damaged,
too short or another memory's is passed over, and the commits are read one by one (invariant 10
of `log`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Literal, Self

from pydantic import model_validator

from ..format.canonical_json import canonical_members
from ..format.changes import Erase
from ..format.codec import Commit
from ..format.signed import CorruptObjectError, Signed
from ..format.wire_values import run_key
from ..objects.retry import gather_bounded

if TYPE_CHECKING:
    from ..state.state import State
    from .reader import LogReader

RUN_EVERY = 4
RUN_COMMITS = 64
RUN_BYTES = 4 * 1024 * 1024


class Run(Signed):
    """Commits `seq - len(commits) + 1` to `seq`, in order and chained, as the log holds them."""

    _shared = True
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

    @cached_property
    def _members(self) -> dict[str, bytes]:
        # The commits' own canonical encodings joined are the bytes of the array encoded whole, and
        # each commit keeps its encoding for its hash (`refused`): no commit is encoded twice, which
        # was a third of checking a run.
        members = canonical_members(self.model_dump(mode="json", by_alias=True, exclude={"commits"}))
        members["commits"] = b'"commits":[' + b",".join(commit.encode() for commit in self.commits) + b"]"
        return dict(sorted(members.items()))

    @classmethod
    def made(cls, commits: Sequence[Commit]) -> Run:
        return cls.signed(seq=commits[-1].seq, commits=commits)

    def stored_at(self, key: str) -> bool:
        return key == run_key(self.seq)

    def refused(self) -> str | None:
        """A commit whose hash does not check, or that holds an erased change: a writer forgets what
        it would pack at an erasure, and a sealed commit's hash does not cover `erased`, so a forged
        run could otherwise mark a text erased."""
        if any(not commit.checkable or commit.hash != commit.body_digest() for commit in self.commits):
            return "a commit it holds does not match its hash"
        if any(getattr(change, "erased", None) is not None for commit in self.commits for change in commit.changes):
            return "it holds an erased change"
        return None


class RecentCommits:
    """The newest commits applied by one process, consecutive up to its head: what a run it writes
    holds. At most `RUN_COMMITS` of them and `RUN_BYTES` (a fold's commits may be megabytes each),
    the oldest let go first; a gap, or an erasure (no run written here holds a text from before
    it), starts them again."""

    def __init__(self) -> None:
        self._commits: deque[Commit] = deque()
        self._bytes = 0  # kept as commits come and go: summed anew, it cost each apply tens of µs

    def __iter__(self) -> Iterator[Commit]:
        return iter(self._commits)

    def __len__(self) -> int:
        return len(self._commits)

    def clear(self) -> None:
        self._commits.clear()
        self._bytes = 0

    def keep(self, commit: Commit) -> None:
        """Take in `commit`, applied next."""
        if (self._commits and self._commits[-1].seq != commit.seq - 1) or any(
            isinstance(change, Erase) for change in commit.changes
        ):
            self.clear()
        self._commits.append(commit)
        self._bytes += commit.encoded_size
        while len(self._commits) > 1 and (len(self._commits) > RUN_COMMITS or self._bytes > RUN_BYTES):
            self._bytes -= self._commits.popleft().encoded_size


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


async def read_run(location: str, seq: int, data: bytes) -> Run | None:
    """The run stored for `seq`, or None when it is not one a writer made (passed over, not an
    error): larger than a writer makes one, or refused by `Run.refused`. Decoded in a worker thread
    when large (a run of 64 commits of a few kilobytes each)."""
    if len(data) > 2 * RUN_BYTES:  # JSON's escapes on top of the commits' own bytes
        return None
    try:
        return await Run.read(location, run_key(seq), data)
    except CorruptObjectError:
        return None


async def commits_through_runs(
    reader: LogReader, state: State, seqs: list[int], runs: list[int], *, read: Mapping[int, Commit] = {}
) -> list[Commit]:
    """The commits at `seqs` (listed after `state`'s head, in order, with the `runs` beside
    them): through the runs that reach back to the head and the commits from the newest run's
    seq on, in one round trip, when that saves GETs; one by one when no runs were listed that
    reach back, or they do not all check. A commit in `read` (one this process read from the log
    lately, at its own key) is not read again: the log's own commit at the newest run's seq
    vouches for the runs whether it is read now or was read while its reader waited."""
    head, read = state.head, dict(read)  # as it is now: the caller's may change while we read
    newest = seqs[-1] if seqs else head
    listed = set(runs)
    top = max((seq for seq in listed if seq <= newest), default=head)
    tops = list(range(top, head, -RUN_COMMITS))  # each run reaches back RUN_COMMITS from its seq
    if all(seq in read for seq in seqs) or top - head < 3 or not listed.issuperset(tops):
        return await _log_commits(reader, seqs, read)
    found, tail = await asyncio.gather(
        gather_bounded(tops, lambda seq: reader.get(run_key(seq))),
        _log_commits(reader, [seq for seq in seqs if seq >= top], read),
    )
    runs_read = [
        None if data is None else await read_run(reader.location, seq, data)
        for seq, data in zip(tops, found, strict=True)
    ]
    commits = _chained(state.head_hash, head, runs_read[::-1], tail)
    if commits is None:
        return [*await _log_commits(reader, [seq for seq in seqs if seq < top], read), *tail]
    return [await reader.erasures.authorize(commit) for commit in commits]  # a GET only for an erasure


async def _log_commits(reader: LogReader, seqs: list[int], read: Mapping[int, Commit]) -> list[Commit]:
    """The log's commits at `seqs`, in order: those in `read` as they are, the rest read now."""
    fetched = iter(await reader.commits_at([seq for seq in seqs if seq not in read]))
    return [read[seq] if seq in read else next(fetched) for seq in seqs]


def _chained(head_hash: str, head: int, runs: list[Run | None], tail: list[Commit]) -> list[Commit] | None:
    """The commits after `head` that `runs` (oldest first) and `tail` (the log's own, from the
    newest run's seq on) hold, if they follow each other from the head's hash in one chain; None
    when a run is missing, damaged or short, or the chain breaks. The log's own commit at the
    newest run's seq vouches for every run: its hash covers all before it."""
    commits: list[Commit] = []
    for run in runs:
        if run is None:
            return None
        commits += [commit for commit in run.commits if commit.seq > head + len(commits)]
    if not commits or commits[-1].hash != tail[0].hash:
        return None
    chain = [*commits[:-1], *tail]
    expected_prev = head_hash
    for number, commit in enumerate(chain):
        if commit.seq != head + 1 + number or commit.prev != expected_prev:
            return None
        expected_prev = commit.hash
    return chain
