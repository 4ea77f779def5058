"""One seeded run: a schedule of steps drawn from the seed, each followed by every auditor.

A step is a round of the fleet's writes, a group commit, an operator command, a forgery by the
agent, or time passing; processes killed in it are restarted cold before the next. After an
agent's forgery that changes what readers serve, `verify` must name it, and the operator runs
`recover` within a few steps (the playbook), after which `verify` names nothing but void commits.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from a13n_harness.providers.memory import MemoryStoreError

from ...admin import MemoryAdmin
from ...format.wire_values import key_seq, log_key
from ..faults import Faults, SimulatedCrash, UnmappedError
from . import actors
from .auditors import AuditState, audit_all
from .forger import FORGERIES, Forger, Forgery
from .virtual_time import VirtualClock, run_virtual
from .world import OPERATOR, Settings, World

SEED_VARIABLE = "BUCKET_MEMORY_SEED"
SKIP_VARIABLE = "BUCKET_MEMORY_SKIP"
MOVES_VARIABLE = "BUCKET_MEMORY_MOVES"  # the replayed run's `Settings.moves`
# How often each kind of step is drawn.
WEIGHTS = {
    "fleet": 30,
    "group": 10,
    "forge": 12,
    "erase": 4,
    "compact": 8,
    "recover": 3,
    "recover-as-of": 2,
    "rollback": 4,
    "restore": 4,
    "export": 3,
    "import": 3,
    "time": 6,
}
OPERATOR_STEPS = ("erase", "compact", "recover", "recover-as-of", "rollback", "restore", "export", "import")
RECOVER_WITHIN = 3
# What a background task of a process may end in: its kill, or an error its caller never sees.
EXPECTED = (
    SimulatedCrash,
    UnmappedError,
    MemoryStoreError,
)  # steps from a forgery that changes what readers serve to the operator's recover


@dataclass
class Outcome:
    """How a run ended: the steps it ran, the first violations the auditors found (none: it held),
    and the trace of every step."""

    seed: int
    steps: int
    violations: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)

    def report(self, replay: str) -> str:
        lines = [f"seed {self.seed} failed at step {self.steps}:", *self.violations, f"replay: {replay}", "trace:"]
        return "\n".join([*lines, *self.trace])


def simulate(seed: int, settings: Settings | None = None, *, skip: frozenset[str] = frozenset()) -> Outcome:
    """Run seed `seed` to its end or its first violation, on virtual time."""
    return run_virtual(seed, lambda clock: _run(seed, settings or Settings(), skip, clock), expected=EXPECTED)


def replay_command(
    seed: int, skip: frozenset[str] = frozenset(), test: str = "tests/test_simulation.py", moves: float = 0.0
) -> str:
    """The one command that replays seed `seed` exactly, with the same auditors switched off."""
    skipping = f"{SKIP_VARIABLE}={','.join(sorted(skip))} " if skip else ""
    moving = f"{MOVES_VARIABLE}={moves} " if moves else ""
    return f"{SEED_VARIABLE}={seed} {moving}{skipping}.venv/bin/pytest {test} -k test_replay"


async def _run(seed: int, settings: Settings, skip: frozenset[str], clock: VirtualClock) -> Outcome:
    world = World.made(seed, settings, clock)
    audit = AuditState()
    outcome = Outcome(seed, 0, trace=world.ledger.trace)
    kinds = [kind for kind in WEIGHTS if settings.forgeries or kind != "forge"]
    recover_at: int | None = None
    for step in range(settings.steps):
        outcome.steps = step
        world.revive(step)
        kind = world.schedule.choices(kinds, weights=[WEIGHTS[kind] for kind in kinds])[0]
        if recover_at is not None and step >= recover_at:
            kind = "recover"
        forgery = await _step(world, audit, step, kind, skip)
        clock.advance(world.schedule.uniform(0, 20))
        with quiet(world):
            await _settle(world)
            world.ledger.moments.append((step, clock.now))
            violations = []
            if forgery is not None and forgery.affects_state and "verify" not in skip:
                violations += await _verify_names(world, forgery, audit.tainted)
                recover_at = (
                    recover_at if recover_at is not None else step + 1 + world.schedule.randrange(RECOVER_WITHIN)
                )
                audit.tainted.extend(forgery.keys)
            if kind == "recover" and recover_at is not None and step >= recover_at:
                violations += await _recovered(world, audit, step, skip)
                recover_at = None
            violations += await audit_all(world, audit, skip)
        if violations:
            outcome.violations = violations
            return outcome
    outcome.steps = settings.steps
    return outcome


async def _step(world: World, audit: AuditState, step: int, kind: str, skip: frozenset[str]) -> Forgery | None:
    if kind == "fleet":
        await actors.fleet_writes(world, step)
    elif kind == "group":
        await actors.group_writes(world, step)
    elif kind in OPERATOR_STEPS:
        await actors.operator_act(world, step, kind)
    elif kind == "forge":
        return await _forge(world, audit, step, skip)
    else:
        world.ledger.note(step, "time passes")
        world.clock.advance(world.schedule.uniform(20, 90))
    return None


# The forgeries each switchable auditor stands for: with it off, the agent does not try them.
FORGERIES_OF = {"forged-erase": ("erase-change",), "intent-cost": ("garbage-intents", "foreign-intent")}


async def _forge(world: World, audit: AuditState, step: int, skip: frozenset[str]) -> Forgery | None:
    left = {kind for name in skip for kind in FORGERIES_OF.get(name, ())}
    kind = world.schedule.choice([kind for kind in FORGERIES if kind not in left])
    with quiet(world):
        forgery = await Forger(world.bucket, world.cold(), random.Random(world.schedule.random())).forge(kind)
    if forgery is None:
        world.ledger.note(step, f"agent {kind}: nothing to act on")
        return None
    world.ledger.note(step, f"agent {kind}: {forgery.detail} ({', '.join(forgery.keys[:3])})")
    if kind == "erase-change":
        audit.forged_erasures[int(forgery.keys[0].split("/")[-1][:20])] = forgery.detail.split()[1]
    if kind == "garbage-intents":
        audit.garbage.update(forgery.keys)
    return forgery


async def _verify_names(world: World, forgery: Forgery, earlier: list[str]) -> list[str]:
    """`verify` names a forgery that changes what readers serve (one of the keys it wrote or
    removed), or an earlier one not yet repaired that breaks the chain before it (no reader reads
    past that break, and verify replays nothing past it either)."""
    problems = await MemoryAdmin(world.cold()).verify()
    if any(problem.key in _near(forgery.keys) for problem in problems):
        return []
    if any(problem.key in _near(earlier) and "void" not in problem.message for problem in problems):
        return []
    if forgery.kind == "erase-change" and all([await world.bucket.get(key) is None for key in forgery.keys]):
        return []  # void (no operator's record), and compacted since: nothing is left to name
    named = [problem.key for problem in problems]
    return [f"[verify] the agent's {forgery.kind} ({forgery.detail}) at {forgery.keys} is not named: {named}"]


def _near(keys: tuple[str, ...] | list[str]) -> set[str]:
    """The keys a forgery wrote or removed, and the commit after each (a deleted commit is named by
    the one after the gap it leaves)."""
    seqs = [seq for seq in map(key_seq, keys) if seq is not None]
    return {*keys, *(log_key(seq + 1) for seq in seqs)}


async def _recovered(world: World, audit: AuditState, step: int, skip: frozenset[str]) -> list[str]:
    """The operator's playbook after a forgery: `recover`, then `verify` names only void commits."""
    admin = MemoryAdmin(world.cold())
    try:
        done = await admin.recover(None, origin=OPERATOR)
    except MemoryStoreError as error:
        return [f"[verify] recover after the forgeries {audit.tainted} failed: {error.code}: {error}"]
    world.ledger.moved(done.restoration.reapplied)
    world.ledger.note(step, f"operator recover (playbook) -> reapplied {list(done.restoration.reapplied)}")
    audit.tainted.clear()
    if "recover-repairs" in skip:
        return []
    problems = await MemoryAdmin(world.cold()).verify()
    left = [f"{problem.key}: {problem.message[:120]}" for problem in problems if "void" not in problem.message]
    return [f"[recover-repairs] after recover, verify still names {left}"] if left else []


async def _settle(world: World) -> None:
    """Let every live process finish its housekeeping (checkpoints, compaction, intent deletions)."""
    for process in [*world.writers, world.operator]:
        if process is not None and process.alive:
            with contextlib.suppress(MemoryStoreError, SimulatedCrash, UnmappedError):
                await process.store.settle()


@contextlib.contextmanager
def quiet(world: World) -> Iterator[None]:
    """No faults and no kills while the auditors read and the agent forges: they are not the system under test."""
    processes = [process for process in [*world.writers, world.operator] if process is not None]
    saved = [(process.objects.faults, process.objects.kill_chance) for process in processes]
    for process in processes:
        process.objects.faults, process.objects.kill_chance = Faults(), 0.0
    try:
        yield
    finally:
        for process, (faults, chance) in zip(processes, saved, strict=True):
            process.objects.faults, process.objects.kill_chance = faults, chance


def seed_from_environment() -> int | None:
    value = os.environ.get(SEED_VARIABLE)
    return int(value) if value else None
