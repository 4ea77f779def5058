"""The auditors: after every step, the memory is held to what its callers were told.

Each auditor has a name, so a run can switch off one whose defect is known while the others keep
looking (`Simulation(skip=...)`); each returns the violations it found as sentences.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from a13n_harness.providers.memory import Changes, MemoryStoreError

from ...files.store import LogFileStore
from .bucket import keys_holding
from .ledger import Ack
from .replay import Replay, Replayed, erasures, replay_retained
from .world import World

# Commits whose texts repeat earlier ones by design: the operator's restore, rollback and import.
_REWRITERS = ("operator", "recover")


@dataclass
class AuditState:
    """What the auditors carry from one step to the next: the feed's cursor, and the keys of the
    forged objects not yet repaired (while any is, the log is not the writers' alone)."""

    cursor: str | None = None
    tainted: list[str] = field(default_factory=list)
    forged_erasures: dict[int, str] = field(default_factory=dict)  # seq -> path, erase changes the agent forged
    garbage: set[str] = field(default_factory=set)


type Auditor = Callable[[World, AuditState, Replay, LogFileStore], Awaitable[list[str]]]


async def exactly_once(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """Each acknowledged write is in the commit it was acknowledged at, and in no other writer's
    commit, until an erase the operator ran removes it (while the log is intact and retains it).
    An acknowledged move's commit holds the text at its destination and not at its source; a
    commit that moves a text to a path writes it no second time."""
    if audit.tainted or replay.broken:
        return []
    found: list[str] = []
    erased = erasures(replay, world.ledger.erasing, audit.forged_erasures)
    # A move of a file the agent forged carries no writer's text: recover, removing the forgery,
    # leaves it nothing to move (seed 475 with moves).
    written = {ack.text for ack in world.ledger.acks if ack.source is None}
    for ack in world.ledger.acks:
        if ack.text is None or ack.version <= replay.base or world.ledger.erased_below(ack, erased):
            continue
        if ack.source is not None and ack.text not in written:
            continue
        homes = [ack.version, *world.ledger.reapplied.get(ack.version, ())]
        held_at = [
            seq for seq in homes if seq in replay.commits and replay.commits[seq].touched.get(ack.path) == ack.text
        ] or [  # a recover killed part-way re-applied it and could not say where (seed 475)
            seq
            for seq, made in replay.commits.items()
            if seq > ack.version and made.by == "recover" and made.touched.get(ack.path) == ack.text
        ]
        commit = replay.commits.get(ack.version)
        if not held_at:
            held = None if commit is None else commit.touched.get(ack.path, "(path untouched)")
            found.append(f"{ack.actor}'s write of {ack.path} acked at {ack.version} is not there: holds {held!r}")
        if ack.source is not None:
            found += _left_behind(ack, [replay.commits[seq] for seq in held_at])
        copies = [
            seq
            for seq, made in replay.commits.items()
            if made.by not in _REWRITERS and made.touched.get(ack.path) == ack.text and ack.path not in made.moved_to
        ]
        if len(copies) > 1:
            found.append(
                f"{ack.actor}'s write of {ack.path} acked at {ack.version} was committed {len(copies)} times: {copies}"
            )
    return found


def _left_behind(ack: Ack, homes: list[Replayed]) -> list[str]:
    """An acknowledged move whose commit still holds the text at the source (or left it untouched)."""
    assert ack.source is not None
    return [
        f"{ack.actor}'s move of {ack.source} to {ack.path} acked at {ack.version} left it at {ack.source} in {made.seq}"
        for made in homes
        if made.touched.get(ack.source, ack.text) == ack.text
    ]


async def forged_erasures(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """An erase change the agent forged drops no file: no reader takes an erasure on its word."""
    return [
        f"the agent's forged erase of {path} at commit {seq} dropped it (verdict {made.verdict})"
        for seq, path in audit.forged_erasures.items()
        # The commit at seq may since hold something else (the agent overwrote it): only an erase
        # of the path there that took the file away counts.
        if (made := replay.commits.get(seq)) is not None and path in made.erases and made.touched.get(path, "") is None
    ]


async def erased_gone(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """No text an erasure (reported done) removed is held by any current object or stored version,
    nor served by any reader."""
    world.ledger.follow_moves(replay.base)
    return await _held_anywhere(world, sorted(world.ledger.erased_texts()))


async def erased_moved(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """As `erased-gone`, for the texts a file had under names it left by a move that compaction
    has since taken out of the retained log (the store then knows the file by its path alone)."""
    world.ledger.follow_moves(replay.base)
    texts = sorted(world.ledger.erased_beyond())
    return await _held_anywhere(world, texts) if texts else []  # no reads where there is nothing to look for


async def _held_anywhere(world: World, texts: list[str]) -> list[str]:
    found = keys_holding(world.bucket, texts)
    for process in world.writers:
        if process.alive:
            files = await _files(process.store)
            found += [f"{process.name} serves erased text at {path}" for path, text in files.items() if text in texts]
    return found


async def verdicts_stable(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """A commit's verdict (valid, or void) never changes once observed."""
    found: list[str] = []
    for seq, made in replay.commits.items():
        seen = world.ledger.verdicts.setdefault((seq, made.hash), made.verdict)
        if (seen == "valid") != (made.verdict == "valid"):
            found.append(f"commit {seq} was {seen!r} and is now {made.verdict!r}")
            world.ledger.verdicts[(seq, made.hash)] = made.verdict
    return found


async def readers_agree(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """Every warm writer serves what a cold reader serves (once forged objects are repaired: until
    then a warm writer may hold the state from before them)."""
    if audit.tainted:
        return []
    served = await _files(cold)
    found: list[str] = []
    for process in world.writers:
        if process.alive and (warm := await _files(process.store)) != served:
            differ = sorted(path for path in set(warm) | set(served) if warm.get(path) != served.get(path))
            found.append(f"{process.name} (warm) and a cold reader disagree on {differ}")
    return found


async def feed_cursor(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """The change feed's rule: with nothing changed since the cursor, the cursor stays."""
    feed = await cold.changes(audit.cursor)
    found: list[str] = []
    if audit.cursor is not None and isinstance(feed, Changes) and not feed.paths and feed.cursor != audit.cursor:
        found.append(f"changes({audit.cursor}) answered no paths and moved the cursor to {feed.cursor}")
    audit.cursor = feed.cursor
    return found


async def intent_cost(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """An object under pending/ that is no intent costs each process at most one read."""
    return [
        f"{key} (garbage) was read {world.bucket.gets[key]} times by {world.births} processes"
        for key in sorted(audit.garbage)
        if world.bucket.gets[key] > world.births
    ]


async def errors_mapped(world: World, audit: AuditState, replay: Replay, cold: LogFileStore) -> list[str]:
    """Every failure a command answers is a MemoryStoreError (a code and what to do), never a bare transient one."""
    found, world.ledger.leaks = world.ledger.leaks, []
    return found


AUDITORS: dict[str, Auditor] = {
    "errors-mapped": errors_mapped,
    "exactly-once": exactly_once,
    "forged-erase": forged_erasures,
    "erased-gone": erased_gone,
    "erased-moved": erased_moved,
    "verdicts": verdicts_stable,
    "readers-agree": readers_agree,
    "feed-cursor": feed_cursor,
    "intent-cost": intent_cost,
}


async def audit_all(world: World, audit: AuditState, skip: frozenset[str]) -> list[str]:
    """Run every auditor not in `skip` on the memory as it stands; the violations, each named."""
    cold = world.cold()
    try:
        replay = await replay_retained(cold)
    except MemoryStoreError as error:
        return [] if audit.tainted else [f"[readable] the retained log cannot be read: {error.code}: {error}"]
    found: list[str] = []
    for name, auditor in AUDITORS.items():
        if name in skip:
            continue
        try:
            found += [f"[{name}] {violation}" for violation in await auditor(world, audit, replay, cold)]
        except MemoryStoreError as error:  # unreadable: fine only while a forgery awaits the operator's recover
            if not audit.tainted:
                found.append(f"[{name}] the memory cannot be read: {error.code}: {error}")
    return found


async def _files(store: LogFileStore) -> dict[str, str]:
    try:
        return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}
    except MemoryStoreError as error:
        return {"(unreadable)": f"{error.code}: {error}"}
