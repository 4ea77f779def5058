"""What each command prints with --json, as pydantic models: their JSON Schemas, kept in
docs/cli/schemas/ (`python -m tools.cli_schemas` writes them), are the contract for scripts."""

from __future__ import annotations

from typing import Any, Literal

from a13n_harness.providers.memory import MemoryErrorCode
from pydantic import BaseModel, ConfigDict, TypeAdapter

from ..records.record_census import VectorCensus
from ..reports import Stats


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Entry(_Output):
    """A file: `ls`."""

    path: str
    version: str
    size: int
    description: str | None


class File(_Output):
    """A file's text at a version: `cat`."""

    path: str
    version: str
    text: str


class Revision(_Output):
    """One change in the history: `log`. `path` is "" for a purge; `other` names the other end of a move;
    `erased` the commit that erased a write's text since (an "erase" entry: who and when)."""

    version: str
    time: str
    action: Literal["write", "delete", "moved-in", "moved-out", "purge", "erase"]
    path: str
    other: str | None
    size: int | None
    erased: int | None = None
    principal: str | None
    run: str | None
    tool_call: str | None


class Diff(_Output):
    """A unified diff between two versions of a file: `diff`. A version whose text was erased is
    compared as empty, and `erased` names it with its erasure commit ("3: erased by commit 9")."""

    path: str
    start: str
    end: str
    diff: str
    erased: list[str] = []


class Written(_Output):
    """A file a command changed (`put`, `mv`, `restore`): its version now, None when it is gone (`rm`)."""

    path: str
    version: str | None


class Match(_Output):
    """A matching line: `grep`."""

    path: str
    line: int
    text: str
    version: str


class SkippedPath(_Output):
    """A path `import` left out (a version-control folder, a link, a FIFO, a socket), and why."""

    path: str
    reason: str


class Bulk(_Output):
    """A change of many files (`rollback`, `import`): the commit it made (None: nothing differed)."""

    commit: int | None
    written: list[str]
    deleted: list[str]
    skipped: list[SkippedPath] = []


class Exported(_Output):
    """`export`: the commit exported and how many files."""

    commit: int
    files: int
    directory: str


class Problem(_Output):
    key: str
    message: str


class Verified(_Output):
    """`verify`: whether the memory is whole, and every problem found."""

    ok: bool
    problems: list[Problem]


class MemoryVerified(_Output):
    """`verify --all`: one memory's verdict (as `verify` gives it), or the store error that stopped
    its check (`error`: its code and message; `ok` false, unless the memory was `destroyed`)."""

    url: str
    ok: bool
    destroyed: bool
    problems: list[Problem]
    error: Failure | None


class MemoryCompacted(_Output):
    """`compact --all`: what compaction did to one memory (as `compact` says), or the store error
    that stopped it (a destroyed memory is `destroyed`, not a failure)."""

    url: str
    compacted: Compacted | None
    destroyed: bool
    error: Failure | None


class MemoryStats(_Output):
    """`stats --all`: one memory at a glance (as `stats` gives it), or the store error that stopped it
    (a destroyed memory is `destroyed`, not a failure)."""

    url: str
    stats: Stats | None
    destroyed: bool
    error: Failure | None


class Compacted(_Output):
    """`compact`: where the history now starts (0: nothing compacted) and what was removed."""

    floor: int
    log_deleted: int
    checkpoints_deleted: int


class Reapplied(_Output):
    start: int
    to: int | None


class Recovered(_Output):
    """`recover`: keys restored and repaired, fork commits re-applied, the head, and the --as-of commit."""

    restored: list[str]
    repaired: list[str]
    reapplied: list[Reapplied]
    head: int
    as_of_commit: int | None
    versioning: str


class Step(_Output):
    setting: str
    action: str
    change: bool


class Initialized(_Output):
    """`init`: its plan, whether it was carried out, and its warnings."""

    bucket: str
    steps: list[Step]
    applied: bool
    warnings: list[str]


class Checked(_Output):
    """`doctor`: the endpoint refuses duplicate creates, the memory loads, and the bucket's versioning."""

    create_only: bool
    versioning: str | None


class MemoryChecked(_Output):
    """`doctor --all`: one memory's checks (as `doctor` gives them), or the store error that stopped
    them (`error`; a destroyed memory is `destroyed`, not a failure). `ok`: no error, versioning on."""

    url: str
    ok: bool
    checked: Checked | None
    destroyed: bool
    error: Failure | None


class ModelShare(_Output):
    """One embedding space's vectors of a record memory (its model, and its dimensions: None for a
    mark from before marks named them): `records doctor`; `reasons` says why each refused failed."""

    model: str
    dimensions: int | None
    vectors: int
    refused: list[str]
    reasons: list[str]


class Vectors(_Output):
    """`records doctor`: the live records, those with no vector, and each model's share."""

    records: int
    without: int
    models: list[ModelShare]

    @classmethod
    def of(cls, found: VectorCensus) -> Vectors:
        shares = [
            ModelShare(
                model=one.model,
                dimensions=one.dimensions,
                vectors=one.vectors,
                refused=list(one.refused),
                reasons=list(one.reasons),
            )
            for one in found.models
        ]
        return cls(records=found.records, without=found.without, models=shares)


class Memory(_Output):
    """A memory found under a bucket or prefix: `memories`."""

    url: str


class Record(_Output):
    """A record of a record memory: `records ls`, `records search` (with its score), `records add`."""

    id: str
    text: str
    updated_at: str | None
    score: float | None


class Erased(_Output):
    """`erase`, `records erase`: the file's names, the erasure commit (None: a dry run that would make
    one), the objects whose texts were (or would be) rewritten, the stored versions deleted."""

    path: str
    paths: list[str]
    erasure: int | None
    rewritten: list[str]
    versions_deleted: list[str]
    dry_run: bool


class Destruction(_Output):
    """`destroy`: what the plan shown counted under the memory's folders (keys, stored versions,
    delete markers among them, bytes) and, unless a dry run, the versions and bytes deleted and the
    tombstones left (no text, path or principal)."""

    url: str
    objects: int
    versions: int
    markers: int
    bytes: int
    versions_deleted: int
    bytes_deleted: int
    tombstones: int
    dry_run: bool


class Removed(_Output):
    """`records rm`: the record deleted."""

    id: str


# The store's codes, and the command line's own: a wrong command line, no memory at the URL, a
# change that needs --yes off a terminal, one declined or stopped at its question, a failure nobody mapped.
type FailureCode = MemoryErrorCode | Literal["usage", "no_memory", "needs_yes", "declined", "aborted", "unexpected"]


class Failure(_Output):
    """Why a command failed (`code`), in words (`message`), and what to do (`hint`, when there is more to say)."""

    code: FailureCode
    message: str
    hint: str | None


class Failed(_Output):
    """What every command prints with --json when it fails, whatever its exit code (not 0)."""

    error: Failure


# Each command's --json output; a test keeps docs/cli/schemas/ equal to these.
OUTPUTS: dict[str, Any] = {
    "ls": list[Entry],
    "cat": File,
    "put": Written,
    "rm": Written,
    "mv": Written,
    "grep": list[Match],
    "log": list[Revision],
    "diff": Diff,
    "restore": Written,
    "rollback": Bulk,
    "export": Exported,
    "import": Bulk,
    "verify": Verified | list[MemoryVerified],
    "compact": Compacted | list[MemoryCompacted],
    "recover": Recovered,
    "erase": Erased,
    "destroy": Destruction,
    "stats": Stats | list[MemoryStats],  # the admin API's own dataclass; a list with --all
    "init": Initialized,
    "doctor": Checked | list[MemoryChecked],
    "memories": list[Memory],
    "records-ls": list[Record],
    "records-search": list[Record],
    "records-add": Record,
    "records-rm": Removed,
    "records-erase": Erased,
    "records-doctor": Vectors,
}


def schema(command: str) -> dict[str, Any]:
    found: dict[str, Any] = TypeAdapter(OUTPUTS[command]).json_schema()
    found["title"] = f"bucket-memory {command.replace('-', ' ')} --json"
    return found


def failure_schema() -> dict[str, Any]:
    """The schema of what any command prints with --json when it fails."""
    found = Failed.model_json_schema()
    found["title"] = "bucket-memory COMMAND --json, when it fails"
    return found
