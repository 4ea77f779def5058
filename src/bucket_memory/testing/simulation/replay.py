"""The auditors' own reading of the retained log: each commit's verdict and what it wrote, from the
oldest retained base on, replayed with the store's rules but none of its caches."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from a13n_harness.providers.memory import MemoryStoreError

from ...files.store import LogFileStore
from ...format.changes import Erase, Move
from ...format.wire_values import reapplied_fork
from ...state.state import State


@dataclass(frozen=True, slots=True)
class Replayed:
    """One retained commit as replayed: its verdict ("valid" or why void), who made it, the paths
    it changed and the text each holds after it (None: deleted, or its text erased), the paths its
    erase changes name and those its moves carried a file to (a move writes no text anew)."""

    seq: int
    hash: str
    verdict: str
    by: str
    touched: dict[str, str | None]
    erases: tuple[str, ...] = ()
    moved_to: tuple[str, ...] = ()


@dataclass
class Replay:
    """The retained log after `base` (the head of the checkpoint it starts from), commit by commit;
    `broken` says why it stops early (a gap or a break in the chain), None when it reaches the head."""

    base: int
    commits: dict[int, Replayed] = field(default_factory=dict)
    broken: str | None = None


async def replay_retained(store: LogFileStore) -> Replay:
    """Replay the retained log of `store`'s bucket from the checkpoint at or after its first commit's base."""
    reader = store.reader
    listed = await reader.list_log()
    commits = await reader.fetch_commits(listed)
    if not commits:
        return Replay(base=0)
    first = commits[0].seq
    state: State | None = State(format=store.format)
    if first > 1:
        bases = [info.key for seq, info in await reader.list_checkpoints() if seq >= first - 1]
        state = await reader.load_checkpoint(bases[0]) if bases else None
    if state is None:
        return Replay(base=commits[-1].seq, broken="no checkpoint under the retained log")
    replay = Replay(base=state.head)
    for commit in commits:
        if commit.seq <= state.head:
            continue
        before = {path: live.version for path, live in state.files.items()}
        try:
            void = state.apply(commit, store.location)
        except MemoryStoreError as error:
            replay.broken = f"commit {commit.seq}: {error}"
            break
        after = state.files
        touched = {
            path: (None if path not in after or after[path].erased is not None else after[path].text)
            for path in set(before) | set(after)
            if before.get(path) != (after[path].version if path in after else None)
        }
        replay.commits[commit.seq] = Replayed(
            commit.seq,
            commit.hash,
            "valid" if void is None else f"void: {void.reason}",
            _by(commit.origin),
            touched,
            tuple(change.path for change in commit.changes if isinstance(change, Erase)),
            tuple(change.destination for change in commit.changes if isinstance(change, Move)),
        )
    return replay


def erasures(replay: Replay, begun: Collection[str], forged: dict[int, str]) -> list[tuple[int, str]]:
    """(seq, path) of the valid erasures in the replayed log of paths the operator began to erase,
    but those the agent forged: an erase killed after its commit still erased."""
    return [
        (seq, path)
        for seq, made in replay.commits.items()
        if made.verdict == "valid" and seq not in forged
        for path in made.erases
        if path in begun
    ]


def _by(origin: object) -> str:
    """Who made a commit, for telling the operator's and recovery's commits from the writers'."""
    if reapplied_fork(origin) is not None:  # type: ignore[arg-type]
        return "recover"
    return getattr(origin, "principal_id", None) or getattr(origin, "run_id", None) or "?"
