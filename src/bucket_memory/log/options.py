"""The tuning of one memory's log, shared by the head, the committer and housekeeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..runtime.deadline import check_seconds


@dataclass(frozen=True, slots=True)
class LogOptions:
    """Tuning of one memory's log.

    `max_staleness` lets reads skip the freshness probe for that many seconds (0: every read is
    fresh). A head confirmed longer ago than half of `grace_period` is re-confirmed by listing
    (invariant 2 of `log`). A checkpoint is written after `checkpoint_min_commits` commits once the
    bytes committed since the last one reach the live size (at once when they also reach 1 MiB),
    and after `checkpoint_max_commits` always (so a cold start replays fewer). Compaction keeps at
    least `retain_commits` commits and those younger than `retain_seconds` as history; with
    `auto_compact` the writer of a checkpoint compacts too.
    Every read and commit is given `operation_timeout` seconds in all, across its requests and
    retries; then it answers `unavailable` (`write_unconfirmed` when a create's outcome is unknown).
    With `probe_before_write_after`, a write whose head was confirmed longer ago than that first
    proves it with one GET (a writer among many, whose head is then usually stale, saves a failed
    PUT and a catch-up; a lone writer pays a GET per write). With `store_edits`, a write of a file
    that exists is stored as the span it changes when that is smaller (an append costs its new
    text, not the whole file); such commits are of format 2, which bucket-memory 0.1 cannot
    read, so a fleet still running older readers turns it off until they are upgraded. With
    `erasable`, each commit seals its texts under random salts (format 3) so that `erase` can
    remove a text from the whole history and `verify` still checks every commit; readers from
    before `erase` cannot read such commits, so turn it off until every reader is upgraded (an
    erasure commit is of format 3 regardless: upgrade them before erasing). With
    `packed_checkpoints`, checkpoints are packed (format 3: an index, then the texts, so that a cold
    open decodes only the texts it reads); readers from before them cannot read such checkpoints,
    so turn it off until every reader is upgraded. With `fleet_commit`, a write that meets other
    processes' writes is published as an intent for whoever commits next to fold into its commit
    (`fleet/`), and such commits are of format 4, which readers before it cannot read; in a
    fleet, runs of recent commits are stored for catching up (`runs.py`). `clock`
    is the local monotonic clock heads are aged by (tests replace it).
    """

    max_staleness: float = 0.0
    grace_period: float = 3600.0
    checkpoint_min_commits: int = 32
    checkpoint_max_commits: int = 32
    max_tombstones: int = 10_000
    retain_commits: int = 1000
    retain_seconds: float = 7 * 24 * 3600.0
    auto_compact: bool = True
    commit_attempts: int = 1000
    request_attempts: int = 6
    operation_timeout: float = 60.0
    probe_before_write_after: float | None = None
    store_edits: bool = True
    erasable: bool = True
    packed_checkpoints: bool = True
    fleet_commit: bool = True
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        check_seconds("LogOptions.operation_timeout", self.operation_timeout)
        probe = self.probe_before_write_after
        if probe is not None and (isinstance(probe, bool) or not isinstance(probe, int | float) or not probe >= 0):
            raise ValueError(f"LogOptions.probe_before_write_after must be None or seconds >= 0, not {probe!r}")
        for flag in ("store_edits", "erasable", "packed_checkpoints", "fleet_commit", "auto_compact"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"LogOptions.{flag} must be True or False, not {getattr(self, flag)!r}")
        for name in ("commit_attempts", "request_attempts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LogOptions.{name} must be a whole number of at least 1, not {value!r}")
