"""A linearizability checker for one memory's history, with the log itself as the witness.

Clients record every operation with the real time it began and ended (`time.monotonic`, which is
one clock for every process of a machine) and what it answered. A file memory numbers its versions
by the seqs of its one log, so the only order a linearization can take is the log's: a mutation
takes effect at the seq of the commit that carries its id (`Origin.tool_call_id`), and a read sees
the memory as of some commit. The history is linearizable when every operation can be given such
a point between its start and its end, in real-time order:

- an acknowledged mutation is in the log once, at the version it returned, and its `expected`
  held just before it there; one that failed is nowhere in the log; an unconfirmed one may be,
  at any point after it began (it never ended);
- a mutation that ended before another began has the lower seq;
- every read (a read, a listing, a change feed, or what a refused write was told about the file)
  sees exactly the memory after some commit, no earlier than anything that ended before it began
  and no later than anything that began after it ended.

Mutation points are fixed, so only reads need choosing: taken in the order they began, each is
given the earliest commit it can have seen, which leaves the most room for every later one (a
read only ever bounds later reads from below). That makes the check a sweep instead of the
exponential search of Wing and Gong's algorithm, and it is exact here because seqs are observable.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from a13n_harness.providers.memory import Changes, FileEntry, FileText, FullResync, MemoryStoreError, Origin

from bucket_memory.format.changes import Change, Delete, Edit, Move, Purge, Write
from bucket_memory.format.codec import Commit
from bucket_memory.format.delta import spliced

type Kind = Literal["read", "list", "changes", "write", "move", "delete", "purge"]
type Seen = tuple[str, str | None] | None  # a file as a read saw it: (version, text or None if not read), or absent
MUTATIONS: frozenset[Kind] = frozenset({"write", "move", "delete", "purge"})
PURGE_ID = "purge"


@dataclass(frozen=True, slots=True)
class Done:
    """The operation answered: a version, a `FileText`, a listing, a change feed, or None."""

    value: object


@dataclass(frozen=True, slots=True)
class Failed:
    """The operation raised `code` (for a version check, with the file it was shown)."""

    code: str
    current: FileText | None = None


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """The operation answered `write_unconfirmed`: it may take effect at any point after it began."""


type Outcome = Done | Failed | Unconfirmed


@dataclass(slots=True)
class Operation:
    """One call a client made, with its arguments, its real-time interval and its outcome."""

    id: str
    client: str
    kind: Kind
    start: float
    end: float = math.inf
    outcome: Outcome = Unconfirmed()
    path: str = ""
    destination: str = ""
    text: str = ""
    expected: str | None = None
    since: str | None = None


class Recorder:
    """Runs a client's calls against a store and records each as an `Operation` in `history`.

    Mutations carry the operation's id as their origin's tool call id, so the log names them.
    Anything but a `MemoryStoreError` escaping the store is recorded as a failure of code `raw`.
    """

    def __init__(self, client: str, history: list[Operation]) -> None:
        self.client = client
        self.history = history
        self._count = 0

    async def call(self, kind: Kind, run: Callable[[Origin], Awaitable[object]], **arguments: object) -> Outcome:
        self._count += 1
        op_id = PURGE_ID if kind == "purge" else f"{self.client}-{self._count}"
        operation = Operation(op_id, self.client, kind, time.monotonic(), **arguments)  # type: ignore[arg-type]
        try:
            value = await run(Origin(run_id="linearizability", tool_call_id=op_id))
        except MemoryStoreError as error:
            operation.outcome = (
                Unconfirmed() if error.code == "write_unconfirmed" else Failed(error.code, error.current)
            )
        except Exception as error:  # the contract allows only MemoryStoreError
            operation.outcome = Failed(f"raw {type(error).__name__}: {error}")
        else:
            operation.outcome = Done(value)
        if not isinstance(operation.outcome, Unconfirmed):
            operation.end = time.monotonic()
        self.history.append(operation)
        return operation.outcome


@dataclass(slots=True)
class _Placed:
    """Where the log put a mutation: its seq, and the files it touched as they were just before."""

    seq: int
    before: dict[str, tuple[str, str] | None]


@dataclass(slots=True)
class Timeline:
    """The memory after every commit, replayed from the log by a model of its own (not `State`)."""

    snapshots: list[dict[str, tuple[str, str]]] = field(default_factory=lambda: [{}])
    changed: list[frozenset[str]] = field(default_factory=lambda: [frozenset()])
    purges: list[int] = field(default_factory=list)
    placed: dict[str, _Placed] = field(default_factory=dict)
    twice: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, commits: Iterable[Commit]) -> Timeline:
        timeline = cls()
        for commit in sorted(commits, key=lambda commit: commit.seq):
            assert commit.seq == len(timeline.snapshots), f"the log has no commit {len(timeline.snapshots)}"
            timeline._apply(commit)
        return timeline

    @property
    def head(self) -> int:
        return len(self.snapshots) - 1

    def _apply(self, commit: Commit) -> None:
        files = dict(self.snapshots[-1])
        changed: set[str] = set()
        version = str(commit.seq)
        for change in commit.changes:
            touched = _paths(change)
            op_id = PURGE_ID if isinstance(change, Purge) else (change.origin or commit.origin).tool_call_id
            if op_id is not None:
                if op_id in self.placed:
                    self.twice.append(op_id)
                self.placed[op_id] = _Placed(commit.seq, {path: files.get(path) for path in touched})
            match change:
                case Write(path, text):
                    assert text is not None, "nothing is erased in these histories"
                    files[path] = (version, text)
                case Edit(path, at, removed, inserted):
                    assert removed is not None and inserted is not None, "nothing is erased in these histories"
                    edited = spliced(files[path][1], at, removed, inserted)
                    assert edited is not None, f"commit {commit.seq}'s edit of {path} does not fit"
                    files[path] = (version, edited)
                case Delete(path):
                    del files[path]
                case Move(source, destination):
                    files[destination] = (version, files.pop(source)[1])
                case Purge():
                    files.clear()
                    self.purges.append(commit.seq)
            changed.update(touched)
        self.snapshots.append(files)
        self.changed.append(frozenset(changed))

    def matches(self, seq: int, seen: Mapping[str, Seen], *, whole: bool) -> bool:
        """Whether the memory after commit `seq` is what a read saw (every file of it, when `whole`)."""
        files = self.snapshots[seq]
        if whole and set(files) != set(seen):
            return False
        for path, observed in seen.items():
            actual = files.get(path)
            if observed is None or actual is None:
                if observed is not actual:
                    return False
            elif observed[0] != actual[0] or (observed[1] is not None and observed[1] != actual[1]):
                return False
        return True

    def by(self, version: object) -> str:
        """Whose the commit a version names is, as the log holds it."""
        seq = int(version) if isinstance(version, str) and version.isdigit() else -1
        return next((op_id for op_id, placed in self.placed.items() if placed.seq == seq), f"no commit {seq}")

    def changed_between(self, after: int, upto: int) -> set[str]:
        return {path for seq in range(after + 1, upto + 1) for path in self.changed[seq]}


def _paths(change: Change) -> tuple[str, ...]:
    match change:
        case Move(source, destination):
            return (source, destination)
        case Purge():
            return ()
        case _:
            return (change.path,)


@dataclass(frozen=True, slots=True)
class _Read:
    """What one operation saw, to be placed at a commit: the files (all of them, when `whole`),
    or for a change feed the exact seq its cursor names (from that seq on, for one that answered
    its caller's cursor with no path)."""

    operation: Operation
    seen: Mapping[str, Seen]
    whole: bool = False
    exactly: int | None = None
    at_least: int = 0  # a feed that answered its caller's cursor with no path saw that seq or later


def check(history: Sequence[Operation], commits: Iterable[Commit]) -> list[str]:
    """Every way the history fails to be linearizable with the log as its witness (empty: it is)."""
    timeline = Timeline.of(commits)
    problems = [f"{op_id} is in the log twice" for op_id in timeline.twice]
    problems += [f"{op.id} raised {op.outcome.code}" for op in history if isinstance(op.outcome, Failed) and _raw(op)]
    fixed: dict[str, int] = {}  # mutation id -> 2 * seq; a read after commit r sits at 2r + 1
    reads: list[_Read] = []
    for op in history:
        placed = timeline.placed.get(op.id) if op.kind in MUTATIONS else None
        if placed is not None:
            fixed[op.id] = 2 * placed.seq
            problems += _mutation_problems(op, placed, timeline)
        elif op.kind in MUTATIONS and isinstance(op.outcome, Done) and not _unchanged(op):
            problems.append(
                f"{op.id} ({op.kind} {op.path}) was acknowledged as {op.outcome.value} but is not in the log, "
                f"where that commit is {timeline.by(op.outcome.value)}"
            )
        read = _read_of(op, placed is not None)
        if isinstance(read, str):
            problems.append(read)
        elif read is not None:
            reads.append(read)
    by_id = {op.id: op for op in history}
    ended = sorted((by_id[op_id].end, position) for op_id, position in fixed.items())
    for op_id, position in fixed.items():
        op = by_id[op_id]
        if (low := _before(ended, op.start)) >= position:
            problems.append(
                f"{op.id} ({op.kind} {op.path}) committed at {position // 2}, before a commit at "
                f"{low // 2} that was acknowledged before it began"
            )
    problems += _place_reads(reads, ended, fixed, by_id, timeline)
    return problems


def _raw(op: Operation) -> bool:
    return isinstance(op.outcome, Failed) and op.outcome.code.startswith("raw ")


def _unchanged(op: Operation) -> bool:
    """A write of the text the file already held answers its version and commits nothing."""
    return op.kind == "write" and isinstance(op.outcome, Done) and op.outcome.value == op.expected


def _mutation_problems(op: Operation, placed: _Placed, timeline: Timeline) -> list[str]:
    where = f"{op.id} ({op.kind} {op.path}) at seq {placed.seq}"
    problems = []
    match op.outcome:
        case Failed(code):
            problems.append(f"{where} raised {code}, yet it happened")
        case Done(value) if op.kind in ("write", "move") and value != str(placed.seq):
            problems.append(f"{where} returned version {value}")
    before = placed.before.get(op.path)
    if op.kind in ("write", "move", "delete") and (before[0] if before else None) != op.expected:
        problems.append(f"{where} expected version {op.expected} but the file was {before}")
    if op.kind == "move" and placed.before.get(op.destination) is not None:
        problems.append(f"{where} moved onto {op.destination}, which existed")
    if op.kind == "write" and timeline.snapshots[placed.seq].get(op.path, ("", ""))[1] != op.text:
        problems.append(f"{where} left another text in the file")
    return problems


def _read_of(op: Operation, placed: bool) -> _Read | str | None:
    """What `op` saw of the memory, to place at a commit; a problem, when what it answered is wrong on its face."""
    outcome = op.outcome
    match op.kind, outcome:
        case "read", Done(FileText(path, text, version)) if path == op.path:
            return _Read(op, {op.path: (version, text)})
        case "read", Failed("not_found"):
            return _Read(op, {op.path: None})
        case "list", Done(list() as entries):
            return _Read(
                op, {entry.path: (entry.version, None) for entry in entries if isinstance(entry, FileEntry)}, whole=True
            )
        case "changes", Done(Changes(cursor, ())) if op.since is not None and _cursor_seq(cursor) == _cursor_seq(
            op.since
        ):
            return _Read(op, {}, at_least=_cursor_seq(cursor))
        case "changes", Done(Changes(cursor) | FullResync(cursor)):
            return _Read(op, {}, exactly=_cursor_seq(cursor))
        case "write", Done(version) if not placed and op.expected is not None and version == op.expected:
            return _Read(op, {op.path: (op.expected, op.text)})
        case (("write" | "move" | "delete"), Failed("version_mismatch", current)):
            seen = (current.version, current.text) if current is not None else None
            if (seen[0] if seen else None) == op.expected:
                return f"{op.id} ({op.kind} {op.path}) was refused version_mismatch, shown the version it expected"
            return _Read(op, {op.path: seen})
        case "move", Failed("not_found"):
            return _Read(op, {op.path: None})
        case "move", Failed("already_exists", FileText(path, text, version)) if path == op.destination:
            return _Read(op, {op.destination: (version, text)})
        case "move", Failed("already_exists"):
            return f"{op.id} (move onto {op.destination}) was refused already_exists without the file"
    return None


def _cursor_seq(cursor: str) -> int:
    return int(cursor.partition("~")[0])


def _before(ended: Sequence[tuple[float, int]], moment: float) -> int:
    """The highest position among fixed operations that ended before `moment` (-1: none)."""
    return max((position for end, position in ended if end < moment), default=-1)


def _place_reads(
    reads: Sequence[_Read],
    ended: Sequence[tuple[float, int]],
    fixed: Mapping[str, int],
    by_id: Mapping[str, Operation],
    timeline: Timeline,
) -> list[str]:
    """Give each read the earliest commit it can have seen, in the order the reads began."""
    problems: list[str] = []
    started = [(by_id[op_id].start, position) for op_id, position in fixed.items()]
    placed: list[tuple[float, int]] = []  # (end, position) of reads placed so far
    for read in sorted(reads, key=lambda read: read.operation.start):
        op = read.operation
        low = max(_before(ended, op.start), _before(placed, op.start), 0)
        high = min((position for start, position in started if start > op.end), default=2 * timeline.head + 2)
        candidates = (
            [read.exactly] if read.exactly is not None else range(max(low // 2, read.at_least), timeline.head + 1)
        )
        seq = next(
            (
                seq
                for seq in candidates
                if low <= 2 * seq + 1 < high and timeline.matches(seq, read.seen, whole=read.whole)
            ),
            None,
        )
        if seq is None:
            problems.append(_stale(read, low, high, timeline))
            continue
        placed.append((op.end, 2 * seq + 1))
        if op.kind == "changes":
            problems += _feed_problems(read, seq, timeline)
    return problems


def _stale(read: _Read, low: int, high: int, timeline: Timeline) -> str:
    op = read.operation
    seen = f"cursor {read.exactly}" if read.exactly is not None else dict(read.seen)
    window = f"after commit {max(low, 0) // 2} and before commit {(high + 1) // 2}"
    return f"{op.id} ({op.kind} {op.path}) saw {seen}, which the memory never held {window} (while it ran)"


def _feed_problems(read: _Read, seq: int, timeline: Timeline) -> list[str]:
    """A change feed lists exactly the paths changed after its caller's cursor; a full resync
    only for a first call, or across a purge."""
    op = read.operation
    value = op.outcome.value if isinstance(op.outcome, Done) else None
    since = None if op.since is None else _cursor_seq(op.since)
    purged = since is not None and any(since < purge <= seq for purge in timeline.purges)
    if isinstance(value, FullResync):
        return (
            [] if since is None or purged else [f"{op.id} answered a full resync from {op.since} with no purge since"]
        )
    assert isinstance(value, Changes)
    if since is None or purged:
        return [f"{op.id} listed changes from {op.since}, across a purge or from no cursor"]
    expected = timeline.changed_between(since, seq)
    if set(value.paths) != expected:
        return [f"{op.id} listed {sorted(value.paths)} as changed after {since} up to {seq}, not {sorted(expected)}"]
    return []
