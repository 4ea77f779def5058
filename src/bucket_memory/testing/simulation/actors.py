"""The honest actors of a run: fleet writers, a group-committing writer, and the operator's commands.

Each action tells the ledger what its caller was told (an acknowledged version, an erasure done)
and the trace what it did. A refusal, an unconfirmed write or a kill is an answer the store may
give under faults; only what was acknowledged binds it.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ...admin import MemoryAdmin
from ..faults import SimulatedCrash, UnmappedError
from .ledger import Ack
from .world import OPERATOR, PATHS, Process, World

# What a caller may be answered under faults (a kill inside a task group arrives in a group):
# none of these binds the store to anything.
ANSWERS = (MemoryStoreError, SimulatedCrash, UnmappedError, BaseExceptionGroup)
# The operator's commands that write old texts anew: as new files, perhaps at names they never had.
COPIERS = ("restore", "import", "rollback", "recover-as-of")


async def write_once(world: World, process: Process, step: int, path: str, draw: random.Random) -> None:
    """One write (or, now and then, a delete) by `process`, its expected version from its own listing."""
    store = process.store
    text = f"{process.name}-s{step}-{draw.randrange(10**6):06d} {path}\n"
    try:
        current = {entry.path: entry.version for entry in await store.list()}
        # Drawn only when moves are on, so that a run without them keeps its schedule.
        if path in current and world.settings.moves and draw.random() < world.settings.moves:
            await move_once(world, process, step, path, [other for other in PATHS if other not in current], draw)
            return
        if path in current and draw.random() < 0.15:
            await store.delete(path, expected=current[path], origin=Origin(principal_id=process.name))
            world.ledger.note(step, f"{process.name} delete {path} -> done")  # a delete answers no version
            return
        version = await store.write(path, text, expected=current.get(path), origin=Origin(principal_id=process.name))
    except ANSWERS as error:
        world.ledger.note(step, f"{process.name} write {path} -> {_answer(error)}")
        return
    expected = int(current[path]) if path in current else None
    world.ledger.acked(Ack(path, text, int(version), process.name, step, expected))
    world.ledger.note(step, f"{process.name} write {path} {text.split()[0]} -> acked at {version}")


async def move_once(
    world: World, process: Process, step: int, source: str, free: list[str], draw: random.Random
) -> None:
    """A move of the file at `source` to a path free in the writer's listing, over the version it read."""
    if not free:
        world.ledger.note(step, f"{process.name} move {source} -> no free path")
        return
    destination = draw.choice(free)
    try:
        read = await process.store.read(source)
        version = await process.store.move(
            source, destination, expected=read.version, origin=Origin(principal_id=process.name)
        )
    except ANSWERS as error:
        world.ledger.note(step, f"{process.name} move {source} {destination} -> {_answer(error)}")
        return
    ack = Ack(destination, read.text, int(version), process.name, step, int(read.version), source)
    world.ledger.acked(ack)
    moved = f"{source}@{read.version} {read.text.split()[0] if read.text else ''} to {destination}"
    world.ledger.note(step, f"{process.name} move {moved} -> acked at {version}")


async def fleet_writes(world: World, step: int) -> None:
    """Every fleet writer writes at once, on paths drawn for each: they race for the same log keys."""
    draw = world.schedule
    chosen = [(process, draw.choice(PATHS), random.Random(draw.random())) for process in world.writers]
    await asyncio.gather(*(write_once(world, process, step, path, mine) for process, path, mine in chosen))


async def group_writes(world: World, step: int) -> None:
    """One writer process sends several writes at once: its log groups them into a commit."""
    process = world.writers[0]
    paths = world.schedule.sample(PATHS, k=world.schedule.randint(2, 4))
    await asyncio.gather(
        *(write_once(world, process, step, path, random.Random(world.schedule.random())) for path in paths)
    )


async def operator_act(world: World, step: int, kind: str) -> None:
    """One operator command, through the operator's process (which faults can kill mid-way)."""
    assert world.operator is not None
    admin = MemoryAdmin(world.operator.store)
    draw = world.schedule
    try:
        summary = await _command(world, admin, step, kind, draw)
    except ANSWERS as error:
        world.ledger.note(step, f"operator {kind} -> {_answer(error)}")
        return
    except Exception as error:  # every failure a caller sees must be a MemoryStoreError
        world.ledger.leaks.append(f"operator {kind} raised {type(error).__name__}: {error}")
        world.ledger.note(step, f"operator {kind} -> {type(error).__name__} leaked: {error}")
        return
    world.ledger.note(step, f"operator {kind} {summary}")


async def _command(world: World, admin: MemoryAdmin, step: int, kind: str, draw: random.Random) -> str:
    ledger = world.ledger
    if kind in COPIERS:
        ledger.copied.append(step)
    if kind == "erase":
        path = draw.choice(PATHS)
        ledger.erasing[path] = step
        plan = await admin.erase(path, origin=OPERATOR)
        if plan.erasure is not None:
            ledger.erasure_done(path, plan.erasure, step)
        return f"{path} -> erasure at {plan.erasure}"
    if kind == "compact":
        return f"-> floor {(await admin.store.compact()).floor}"
    if kind == "recover":
        done = await admin.recover(None, origin=OPERATOR)
        ledger.moved(done.restoration.reapplied)
        return f"-> {_restoration(done.restoration)}"
    if kind == "recover-as-of":
        if not ledger.moments:
            return "-> nothing to go back to"
        at_step, moment = draw.choice(ledger.moments)
        done = await admin.recover(datetime.fromtimestamp(moment, UTC), origin=OPERATOR)
        ledger.moved(done.restoration.reapplied)
        return f"--as-of step {at_step} -> {_restoration(done.restoration)}, commit {done.as_of_commit}"
    if kind == "rollback":
        head = max(1, (await admin.store.state()).head)
        seq = draw.randint(max(1, head - 4), head)
        return f"--to {seq} -> {await admin.rollback(seq, origin=OPERATOR)}"
    if kind == "restore":
        acks = [ack for ack in ledger.acks if ack.text is not None]
        if not acks:
            return "-> nothing to restore"
        ack = draw.choice(acks)
        return f"{ack.path} {ack.version} -> {await admin.restore(ack.path, str(ack.version), origin=OPERATOR)}"
    if kind == "export":
        store = admin.store
        files = {entry.path: (await store.read(entry.path)).text for entry in await store.list()}
        ledger.exports.append((step, files))
        return f"-> {len(files)} files"
    if kind == "import":
        if not ledger.exports:
            return "-> no export yet"
        at_step, files = draw.choice(ledger.exports)
        return f"export of step {at_step} -> {await admin.put_files(files, replace=False, origin=OPERATOR)}"
    raise ValueError(f"no operator command {kind!r}")


def _restoration(restoration: object) -> str:
    restored = getattr(restoration, "restored", ())
    repaired = getattr(restoration, "repaired", ())
    reapplied = getattr(restoration, "reapplied", ())
    return f"restored {len(restored)}, repaired {len(repaired)}, reapplied {list(reapplied)}"


def _answer(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        answers, rest = error.split(ANSWERS[:3])
        if rest is not None or answers is None:
            raise error  # something other than an answer the store may give: a failure of the run
        return " / ".join(_answer(inner) for inner in answers.exceptions)
    if isinstance(error, MemoryStoreError):
        return f"{error.code}: {str(error)[:100]}"
    return f"{type(error).__name__}: {str(error)[:100]}"
