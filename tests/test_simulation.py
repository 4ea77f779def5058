"""The deterministic simulation (src/bucket_memory/testing/simulation): seeds of a whole history
with auditors after every step, a replay of one seed, and directed scenarios for the defects of
issue 53, each through the simulator's actors and auditors.

A failing seed prints the command that replays it exactly and its step trace.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Awaitable, Callable, Iterable

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import MemoryAdmin
from bucket_memory.format.changes import Edit, Erase, Write
from bucket_memory.testing.faults import Faults
from bucket_memory.testing.simulation.actors import fleet_writes
from bucket_memory.testing.simulation.auditors import AuditState, audit_all
from bucket_memory.testing.simulation.forger import Forger
from bucket_memory.testing.simulation.ledger import Ack
from bucket_memory.testing.simulation.run import SEED_VARIABLE, SKIP_VARIABLE, Outcome, replay_command, simulate
from bucket_memory.testing.simulation.virtual_time import VirtualClock, run_virtual
from bucket_memory.testing.simulation.world import OPERATOR, Settings, World

# Auditors of defects the simulator found that are not fixed yet, off in the random seeds so that
# the seeds keep looking for the rest: none now.
KNOWN: frozenset[str] = frozenset()
SEEDS = int(os.environ.get("BUCKET_MEMORY_SIM_SEEDS", "200"))
# Seeds that still find a defect: each is a test that must fail until its fix lands. Seeds that
# found one fixed since stay in the range as its test (4: a forged checkpoint below the chain's
# base; 38: one created past a gap an erase left in the versions; 54: a recorded erasure on a fork;
# 90: an unrecorded erasure beside garbage intents; 28: an erased commit taken for a fork; 76 and
# 225: an erase deleted a commit's first version and left a forgery the oldest; 129: the same of a
# checkpoint; 218: a forged erase taken for a fork that recover re-applies; 156 and 237: an erase
# past a commit deleted by hand; 144: an erasure made in a deleted commit's place; 303: recover
# committed an erasure of a file written after the erasure it finished; 95: recover put back the
# first version of a commit an erase had rewritten; 102 and 198, and past the range 376, 392, 436
# and 598: a process that loaded a forged checkpoint or commit served it after recover, which now
# commits a mark that makes processes load again). Past the range too: 314 (an erase left a
# forged commit a key's oldest version), 475 (a recover killed part-way; a process at its head's
# seq on a replaced chain), 2736 (an erase deleted the first version of a commit an agent had
# overwritten, the only copy of its writes), 1739 (erase adopted an agent's forged erase of the
# path as an earlier release's, a later delete making it look so), 883 (a checkpoint made again
# where recover re-applied a fork was named disproved, its first version the fork's), 1321 (an
# erase's rewrite of a forged checkpoint left it the key's only version, past a gap the erase
# made below it), 715 (an erase killed after rewriting a checkpoint, before the void commit above
# it, turned the commit valid; reached once 1321's fix moved the kill), 2629 (an erase killed
# while deleting versions left an agent's overwrite a commit's oldest version; reached so too),
# 2760 (a recover killed between removing a forged checkpoint and its reload mark: the next
# recover now owes the mark), and past the slow range 3859 (recover re-applied an erasure at a new
# seq, and the marks its erase wrote in commits and checkpoints still named the old one: the erase
# recover finishes now moves them to it) and 5577 (a process that loaded a forged checkpoint
# committed an erase, checkpointed and compacted on it, and the erase deleted the versions below it
# that disproved it: an erase now refuses before it deletes anything while a checkpoint its log
# disproves stands), run in `make test-slow` beside the range (PAST_THE_RANGE).
# The slow range (200-2999), scanned once after those fixes, found no more; seeds 3000-6599
# found only 3859 and 5577. None is known to fail:
FOUND: dict[int, str] = {}
PAST_THE_RANGE = (3859, 5577)


def check(outcome: Outcome, skip: frozenset[str] = KNOWN) -> None:
    if outcome.violations:
        pytest.fail(outcome.report(replay_command(outcome.seed, skip)), pytrace=False)


@pytest.fixture(autouse=True)
def _quiet_logs() -> None:
    logging.getLogger("bucket_memory").setLevel(logging.CRITICAL)


def seeds(numbers: Iterable[int]) -> list[object]:
    return [
        pytest.param(seed, marks=pytest.mark.xfail(strict=True, reason=FOUND[seed])) if seed in FOUND else seed
        for seed in numbers
    ]


@pytest.mark.parametrize("seed", seeds(range(SEEDS)))
def test_a_seeded_history_holds_every_promise(seed: int) -> None:
    check(simulate(seed, skip=KNOWN))


@pytest.mark.slow
@pytest.mark.parametrize(
    "seed", seeds([*range(SEEDS, 3000), *sorted({*PAST_THE_RANGE, *(seed for seed in FOUND if seed >= 3000)})])
)
def test_a_seeded_history_holds_every_promise_at_scale(seed: int) -> None:
    check(simulate(seed, skip=KNOWN))


def test_replay() -> None:
    """Replays the seed in BUCKET_MEMORY_SEED with every auditor on (BUCKET_MEMORY_SKIP: names to switch off)."""
    seed = os.environ.get(SEED_VARIABLE)
    if not seed:
        pytest.skip(f"set {SEED_VARIABLE} to the seed to replay")
    skip = frozenset(filter(None, os.environ.get(SKIP_VARIABLE, "").split(",")))
    check(simulate(int(seed), skip=skip), skip)


def test_a_seed_runs_the_same_twice() -> None:
    """Two runs of one seed take the same steps and get the same answers: a failure replays."""
    first, second = simulate(7, skip=KNOWN), simulate(7, skip=KNOWN)
    assert first.trace == second.trace and len(first.trace) > 40


# Directed scenarios: the defects issue 53 names, each a short deterministic run of the simulator's
# actors on a calm world (no faults, no kills), held to its auditors. Each fails on the code before
# the fix that closes it (another branch): the integrator removes the mark with that fix.


def directed(script: Callable[[World, AuditState], Awaitable[list[str]]], faults: Faults | None = None) -> list[str]:
    settings = Settings(faults=faults or Faults(), kill_chance=0.0)

    async def main(clock: VirtualClock) -> list[str]:
        return await script(World.made(0, settings, clock), AuditState())

    return run_virtual(0, main)


async def acked(world: World, path: str, text: str, writer: int = 0) -> int:
    store = world.writers[writer].store
    current = {entry.path: entry.version for entry in await store.list()}
    version = int(await store.write(path, text, expected=current.get(path), origin=Origin(principal_id="w0")))
    world.ledger.acked(Ack(path, text, version, "w0", 0))
    return version


async def erased(world: World, path: str) -> None:
    assert world.operator is not None
    world.ledger.erasing[path] = 0
    plan = await MemoryAdmin(world.operator.store).erase(path, origin=OPERATOR)
    assert plan.erasure is not None
    world.ledger.erasure_done(path, plan.erasure, 0)


def forger(world: World) -> Forger:
    return Forger(world.bucket, world.cold(), random.Random(0))


def test_an_agents_forged_erase_drops_no_acknowledged_file() -> None:
    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "contract.md", "signed terms\n")
        forged = await forger(world).commit(Erase(path="contract.md"), origin=OPERATOR)
        assert forged is not None
        audit.forged_erasures[forged.seq] = "contract.md"
        found = await audit_all(world, audit, frozenset())
        await MemoryAdmin(world.cold()).recover(None, origin=OPERATOR)
        return found + await audit_all(world, audit, frozenset())

    assert directed(script) == []


def test_an_unrelated_erase_leaves_a_void_commit_void() -> None:
    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "alice's notes\n")
        misfit = Edit(path="alice.md", at=0, removed="not what it holds", inserted="x", size=1)
        assert await forger(world).commit(misfit, Write(path="payroll.md", text="Pay Mallory.\n"))
        found = await audit_all(world, audit, frozenset())  # observes the commit void
        await erased(world, "alice.md")
        return found + await audit_all(world, audit, frozenset())

    # Requests take time: at zero latency the erasure and the warm readers' last proof share one
    # virtual instant, and a read at that instant is rightly served by the proof made then.
    assert directed(script, Faults(latency=0.01)) == []


def test_an_import_after_compaction_brings_no_erased_text_back() -> None:
    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "alice's secret\n")
        store = world.writers[0].store
        export = {entry.path: (await store.read(entry.path)).text for entry in await store.list()}
        await erased(world, "alice.md")
        for index in range(8):  # enough commits that compaction leaves the erasure's commit behind
            await acked(world, "notes/a.md", f"note {index}\n")
        world.clock.advance(120)
        assert world.operator is not None
        admin = MemoryAdmin(world.operator.store)
        await admin.store.compact()
        await admin.put_files(export, replace=False, origin=OPERATOR)
        return await audit_all(world, audit, frozenset())

    assert directed(script) == []


def test_garbage_under_pending_costs_the_fleet_one_read() -> None:
    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "first\n")
        garbage = await forger(world).forge("garbage-intents")
        assert garbage is not None
        audit.garbage.update(garbage.keys)
        for step in range(6):
            await fleet_writes(world, step)
        return await audit_all(world, audit, frozenset())

    assert directed(script, Faults(latency=0.01)) == []


def test_a_commit_that_changes_nothing_leaves_the_feed_cursor() -> None:
    """Found by the simulator's feed auditor on its first seed: a void commit (as a fold of only
    refused intents) changes nothing, yet `changes` answers no paths with the cursor moved."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "first\n")
        found = await audit_all(world, audit, frozenset())  # the feed's cursor, at the head
        assert await forger(world).forge("void-commit")
        return found + await audit_all(world, audit, frozenset())

    assert directed(script) == []


def test_the_exactly_once_auditor_excuses_no_erasure_made_without_an_erase_begun_after_the_write() -> None:
    """The auditor missed seed 303: it excused an acknowledged write wherever a valid erasure of
    its path followed it in the log, for any path the operator had ever begun to erase. Recover
    then committed an erasure of a file written after the one it finished, and nothing was named.
    An erasure in the log excuses a write only when an erase of its path began after the write."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "the erased text\n")
        await erased(world, "alice.md")
        fresh = world.cold()
        version = int(await fresh.write("alice.md", "written after\n", expected=None, origin=Origin(principal_id="w0")))
        world.ledger.acked(Ack("alice.md", "written after\n", version, "w0", 1))
        # As recover did: an erase no operator began since the write.
        await MemoryAdmin(world.cold()).erase("alice.md", origin=OPERATOR)
        return await audit_all(world, audit, frozenset())

    found = directed(script, Faults(latency=0.01))  # see the test above: warm readers' proofs take time
    named = [violation.split(" is not")[0] for violation in found]
    assert named == ["[exactly-once] w0's write of alice.md acked at 3"]
