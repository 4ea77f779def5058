"""The values stored objects hold, each checked as hostile input: the keys a memory owns and their
seqs, file paths, origins, times, and the bytes a text takes once stored.

A path of plain printable ASCII (nearly every path) is checked by one regular expression that
accepts exactly what the harness's `validate_path` returns unchanged; anything else goes through
`validate_path`. The `Wire*` types are these checks as pydantic field types, for `codec`'s models.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from operator import itemgetter
from typing import Annotated

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin, validate_path
from pydantic import AfterValidator, Field

# The largest object a reader accepts: a whole memory of 32 MiB of text, several times over for
# JSON escapes. Anything larger is refused before it is parsed.
MAX_OBJECT_BYTES = 256 * 1024 * 1024
LOG_PREFIX = "log/"
CHECKPOINT_PREFIX = "checkpoints/"
PENDING_PREFIX = "pending/"
# The operator's records of its erasures (`erasure_record`): agents may read them, never write them.
ERASURES_PREFIX = "erasures/"
RESERVED_FOLDERS = ("log", "checkpoints", "erasures")

MAX_SEQ = 10**20 - 1
MAX_ORIGIN_CHARS = 1024
# Wide enough for any path a store with a larger `FileFormat.path_bytes` may have written.
_WIRE_FORMAT = FileFormat(path_bytes=4096)
_KEY = re.compile(r"(log|checkpoints)/(\d{20})\.json")
# Runs sit beside the commits they copy, so that the listing a catch-up makes names them.
_RUN_KEY = re.compile(r"log/(\d{20})\.run\.json")
_ESCAPED = bytes(range(32)) + b'"\\'
_SHORT_ESCAPED = b'"\\\b\f\n\r\t'
_ESCAPED_BUT_NEWLINE = _ESCAPED.replace(b"\n", b"")
# Segments of printable ASCII other than "/" and "\\", none of them "." or "..": a path the harness's
# `validate_path` returns unchanged (ASCII is its own NFC form).
_PATH_CHARACTER = r"[ -.0-\[\]-~]"
_SEGMENT = rf"(?!\.\.?(?:/|$)){_PATH_CHARACTER}+"
_PLAIN_PATH = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
# The same, for each line of paths joined by newlines (which `_SEGMENT` never takes), at most the
# wire format's bytes each (ASCII: a character is a byte). Possessive: no segment or line ever needs
# to give back what it took, and greedy repeats kept a backtrack point for each, across all the
# lines at once (an attacker's review measured 60 bytes of memory per byte of paths).
_LINE_SEGMENT = rf"(?!\.\.?[/\n]){_PATH_CHARACTER}++"
_PLAIN_PATH_LINES = re.compile(
    rf"(?:(?=[^\n]{{1,{_WIRE_FORMAT.path_bytes}}}\n){_LINE_SEGMENT}(?:/{_LINE_SEGMENT})*+\n)*+"
)
_TIME = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


def log_key(seq: int) -> str:
    return f"{LOG_PREFIX}{seq:020d}.json"


def checkpoint_key(seq: int) -> str:
    return f"{CHECKPOINT_PREFIX}{seq:020d}.json"


def erasure_record_key(seq: int, commit_hash: str) -> str:
    """Where the operator records its erasure commit `seq` with hash `commit_hash` (one key per
    attempt: a commit that lost its seq leaves a record naming a hash the log never held)."""
    return f"{ERASURES_PREFIX}{seq:020d}-{commit_hash}.json"


_ERASURE_RECORD_KEY = re.compile(r"erasures/(\d{20})-([0-9a-f]{64})\.json")


def erasure_record_parts(key: str) -> tuple[int, str] | None:
    """The (seq, commit hash) an erasure record's key names, or None for any other key."""
    match = _ERASURE_RECORD_KEY.fullmatch(key)
    return (int(match[1]), match[2]) if match else None


def run_key(seq: int) -> str:
    return f"{LOG_PREFIX}{seq:020d}.run.json"


def is_owned(key: str) -> bool:
    """Whether the store writes `key`: a commit, checkpoint, run, intent or erasure record."""
    return (
        key_seq(key) is not None
        or run_seq(key) is not None
        or intent_key_parts(key) is not None
        or erasure_record_parts(key) is not None
    )


def run_seq(key: str) -> int | None:
    """The seq of a run's key (`log/<20 digits>.run.json`), else None."""
    match = _RUN_KEY.fullmatch(key)
    return int(match[1]) if match else None


_INTENT_KEY = re.compile(r"pending/(\d{13})-(\d{20})-([0-9a-f]{32})\.json")


def intent_key(made: int, base: int, intent_id: str) -> str:
    """Where an intent is published: by when it was made (milliseconds since the epoch, its
    author's clock), so that a listing gives the oldest first, then its base and its id."""
    return f"{PENDING_PREFIX}{made:013d}-{base:020d}-{intent_id}.json"


def intent_key_parts(key: str) -> tuple[int, int, str] | None:
    """The (made, base, id) an intent's key names, or None for a key that is not an intent's."""
    match = _INTENT_KEY.fullmatch(key)
    return (int(match[1]), int(match[2]), match[3]) if match else None


def key_seq(key: str) -> int | None:
    """The seq of a key the store writes (`log/<20 digits>.json` or `checkpoints/...`), else None."""
    match = _KEY.fullmatch(key)
    return int(match[2]) if match else None


RECOVER_RUN = "bucket-memory recover"
_REAPPLIES = "reapplies:"


def reapplication(fork: str) -> Origin:
    """The origin of the commit by which recovery re-applies fork commit `fork` (an id)."""
    return Origin(run_id=RECOVER_RUN, tool_call_id=f"{_REAPPLIES}{fork}")


def reapplied_fork(origin: Origin) -> str | None:
    """The id of the fork commit whose re-application `origin` marks, if it marks one."""
    tool_call = origin.tool_call_id or ""
    return (
        tool_call.removeprefix(_REAPPLIES)
        if origin.run_id == RECOVER_RUN and tool_call.startswith(_REAPPLIES)
        else None
    )


_RELOAD = "reload"


def reload_mark() -> Origin:
    """The origin of the empty commit by which `recover` tells every process to load the memory
    again: it repaired or removed objects a process may have loaded (a forged checkpoint), which
    nothing else in the log would tell it."""
    return Origin(run_id=RECOVER_RUN, tool_call_id=_RELOAD)


def reloads(origin: Origin) -> bool:
    """Whether a commit's origin is `recover`'s mark to load the memory again. A forged mark costs
    each process one cold start, nothing else."""
    return origin.run_id == RECOVER_RUN and origin.tool_call_id == _RELOAD


def checked_origin(origin: object) -> Origin:
    """The caller's origin if every field is None or a short string of UTF-8 text, else `invalid_text`.

    Checked before a change is batched, so a bad origin fails its own caller and nobody else. The
    mark of a recovery's re-application is refused: recovery skips the forks it names, so a writer
    that could forge it could make an acknowledged fork commit vanish.
    """
    checked = _origin_text(origin)
    if reapplied_fork(checked) is not None:
        raise MemoryStoreError(
            "invalid_text",
            f"An origin with run_id {RECOVER_RUN!r} and a tool call id starting {_REAPPLIES!r} is reserved for "
            "`bucket-memory recover`; use another run id or tool call id.",
        )
    return checked


def _origin_text(origin: object) -> Origin:
    """`origin` if every field is None or a short string of UTF-8 text, else `invalid_text`."""
    if not isinstance(origin, Origin):
        raise MemoryStoreError("invalid_text", f"An origin is an a13n_harness Origin, not {type(origin).__name__}.")
    for name in ("run_id", "principal_id", "tool_call_id"):
        value = getattr(origin, name)
        if value is not None and not _is_origin_text(value):
            raise MemoryStoreError(
                "invalid_text",
                f"Origin.{name} must be None or a string of at most {MAX_ORIGIN_CHARS} characters of UTF-8 text "
                f"without control characters; got {type(value).__name__} {str(value)[:80]!r}.",
            )
    return origin


def _is_origin_text(value: object) -> bool:
    if type(value) is not str or len(value) > MAX_ORIGIN_CHARS:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return not any(unicodedata.category(char) == "Cc" for char in value)


def _wire_origin(origin: Origin) -> Origin:
    try:
        return _origin_text(origin)
    except MemoryStoreError as error:
        raise ValueError(str(error)) from None


def checked_path(path: object, fmt: FileFormat) -> str:
    """The canonical form of a file path, or `invalid_path`: the harness's `validate_path`, with
    plain printable ASCII (nearly every path) checked by one regular expression, ten times faster."""
    if not isinstance(path, str):
        raise MemoryStoreError("invalid_path", f"A path is a string, not {type(path).__name__}.")
    if len(path) <= fmt.path_bytes and _PLAIN_PATH.fullmatch(path):
        return path
    return validate_path(path, fmt)


def _wire_path(path: str) -> str:
    try:
        canonical = checked_path(path, _WIRE_FORMAT)
    except MemoryStoreError as error:
        raise ValueError(f"path {path[:80]!r}: {error}") from None
    if canonical != path:
        raise ValueError(f"path {path[:80]!r} is not in NFC form")
    return path


def _wire_paths[Row: tuple[str, *tuple[object, ...]]](rows: tuple[Row, ...]) -> tuple[Row, ...]:
    _wire_path_list(tuple(map(itemgetter(0), rows)))
    return rows


def _wire_path_list(paths: tuple[str, ...]) -> tuple[str, ...]:
    # A checkpoint names every file: one pass over all its paths is a tenth of a cold open's
    # validation, against one call per path. The count of newlines proves that none is inside a path.
    lines = "\n".join(paths) + "\n"
    if lines.count("\n") == len(paths) and _PLAIN_PATH_LINES.fullmatch(lines):
        return paths
    for path in paths:
        _wire_path(path)
    return paths


def _real_time(time: str) -> str:
    """A time of the commit format that names a moment the calendar has (the pattern admits month 13)."""
    moment_of(time)  # raises ValueError for a date or hour that does not exist
    return time


type WireOrigin = Annotated[Origin, AfterValidator(_wire_origin)]
type WirePath = Annotated[str, AfterValidator(_wire_path)]
# Paths, checked all at once.
type WirePaths = Annotated[tuple[str, ...], AfterValidator(_wire_path_list)]
# Rows that each start with a `WirePath`, checked all at once.
type WirePathRows[Row: tuple[str, *tuple[object, ...]]] = Annotated[tuple[Row, ...], AfterValidator(_wire_paths)]
type Seq = Annotated[int, Field(ge=0, le=MAX_SEQ)]
type Hash = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
type Time = Annotated[str, Field(pattern=_TIME), AfterValidator(_real_time)]
type Salt = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


def stored_size(text: str) -> int:
    """Bytes a file's text takes in a commit or a checkpoint: its UTF-8, with JSON's escapes
    (two bytes for a quote, a backslash and \\n-style escapes, six for other control characters)."""
    return stored_size_of(text.encode())


def stored_size_of(data: bytes) -> int:
    """`stored_size` of the text whose UTF-8 is `data`."""
    # Counted by deleting the escaped bytes, faster than encoding the JSON. Nearly every text
    # escapes only its newlines, which one deletion and a count settle (a cold open counts each file).
    if len(data.translate(None, _ESCAPED_BUT_NEWLINE)) == len(data):
        return len(data) + data.count(b"\n")
    escaped = len(data) - len(data.translate(None, _ESCAPED))
    if not escaped:
        return len(data)
    short = len(data) - len(data.translate(None, _SHORT_ESCAPED))
    return len(data) + short + 5 * (escaped - short)


def time_text(seconds: float) -> str:
    """A moment as commits and checkpoints record it (milliseconds, UTC)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def moment_of(time: str) -> datetime:
    """The moment a time recorded by `time_text` names."""
    return datetime.fromisoformat(time)
