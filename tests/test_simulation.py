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
from bucket_memory.history.erased_file import ErasedFile
from bucket_memory.testing.faults import Faults
from bucket_memory.testing.simulation.actors import fleet_writes
from bucket_memory.testing.simulation.auditors import AuditState, audit_all
from bucket_memory.testing.simulation.forger import Forger
from bucket_memory.testing.simulation.ledger import Ack
from bucket_memory.testing.simulation.run import (
    MOVES_VARIABLE,
    SEED_VARIABLE,
    SKIP_VARIABLE,
    Outcome,
    replay_command,
    simulate,
)
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
# disproves stands) and 8135 (an erase killed at a void commit after it had rewritten the commit
# below that wrote the text the void edit was checked against: void turned valid; the void commits'
# rewrites now land first), run in `make test-slow` beside the range (PAST_THE_RANGE).
# The slow range (200-2999), scanned once after those fixes, found no more; seeds 3000-8999
# found only 3859, 5577 and 8135. None is known to fail:
FOUND: dict[int, str] = {}
PAST_THE_RANGE = (3859, 5577, 8135)


def check(outcome: Outcome, skip: frozenset[str] = KNOWN, moves: float = 0.0) -> None:
    if outcome.violations:
        pytest.fail(outcome.report(replay_command(outcome.seed, skip, moves=moves)), pytrace=False)


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
    """Replays the seed in BUCKET_MEMORY_SEED with every auditor on (BUCKET_MEMORY_SKIP: names to switch
    off; BUCKET_MEMORY_MOVES: the chance a write is a move)."""
    seed = os.environ.get(SEED_VARIABLE)
    if not seed:
        pytest.skip(f"set {SEED_VARIABLE} to the seed to replay")
    skip = frozenset(filter(None, os.environ.get(SKIP_VARIABLE, "").split(",")))
    moves = float(os.environ.get(MOVES_VARIABLE) or 0.0)
    check(simulate(int(seed), Settings(moves=moves), skip=skip), skip, moves)


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


# Moves: writers move files (Settings.moves); an erase follows a file through them.

MOVES = 0.3
MOVE_SEEDS = int(os.environ.get("BUCKET_MEMORY_SIM_MOVE_SEEDS", "30"))
# Off in the seeds with moves until its fix lands: an erase leaves a file's texts under a name it
# left by a move that compaction took out of the retained log (the directed test below).
KNOWN_WITH_MOVES = KNOWN | {"erased-moved"}


# Seeds with moves (scanned 0-2999 at 0.3) that still find a defect, each a test that must fail
# until its fix lands: an import writes an erased text back at a name its file left (the directed
# test below); verify still names, after recover, a checkpoint the first versions of its log
# disprove (an erase past compaction left the file's text unerased in commits of its earlier name,
# the erased-moved defect: verify names one at once after such an erase, which recover repairs
# there but not after the killed erases and recovers of these seeds); or a fork commit whose
# moves no longer apply on the restored chain (recover re-applies nothing of it, and marks nothing).
# Seeds 17, 304, 528 and 2964 found defects fixed since (their directed tests below).
MOVES_FOUND: dict[int, str] = {
    834: "an import writes an erased text back at a name its file left",
    2003: "an import writes an erased text back at a name its file left",
    **dict.fromkeys((417, 529, 1104, 1797, 2100, 2459), "erased-moved: a checkpoint the first versions disprove"),
    **dict.fromkeys((439, 475, 2938), "a fork commit whose moves no longer apply stays off the chain"),
    # Found scanning 3000-4199 with moves, not read yet: after killed erases, agent overwrites and a
    # killed recover, verify names an erased mark no erasure accounts for (3295) and a checkpoint
    # that differs from the log's replay (3796, perhaps the erased-moved limit).
    3295: "after recover, a text marked erased by a commit that erased no such file",
    3796: "after recover, a checkpoint differs from the state the log replays to",
    # Found scanning 4200-5399 with moves, not read yet (5220 may be the ledger's, or a lost write: read it first).
    4385: "an erased text still held by a current commit",
    4426: "an erased text still held by a current commit",
    4466: "after recover, a commit off the chain that recover should re-apply",
    4655: "after recover, a checkpoint the first versions of its log disprove",
    5220: "an acknowledged write is not in the commit it was acknowledged at",
}


@pytest.mark.parametrize("seed", range(MOVE_SEEDS))
def test_a_seeded_history_with_moves_holds_every_promise(seed: int) -> None:
    check(simulate(seed, Settings(moves=MOVES), skip=KNOWN_WITH_MOVES), KNOWN_WITH_MOVES, MOVES)


@pytest.mark.slow
@pytest.mark.parametrize(
    "seed", [pytest.param(seed, marks=pytest.mark.xfail(strict=True, reason=why)) for seed, why in MOVES_FOUND.items()]
)
def test_a_seeded_history_with_moves_found_a_defect(seed: int) -> None:
    check(simulate(seed, Settings(moves=MOVES), skip=KNOWN_WITH_MOVES), KNOWN_WITH_MOVES, MOVES)


async def moved(world: World, source: str, destination: str) -> int:
    store = world.writers[0].store
    read = await store.read(source)
    version = int(await store.move(source, destination, expected=read.version, origin=Origin(principal_id="w0")))
    world.ledger.acked(Ack(destination, read.text, version, "w0", 0, int(read.version), source))
    return version


def moving(script: Callable[[World, AuditState], Awaitable[list[str]]]) -> list[str]:
    """A directed run whose ledger follows moves, as a run with `Settings.moves` on does."""

    async def followed(world: World, audit: AuditState) -> list[str]:
        world.ledger.moving = True
        return await script(world, audit)

    return directed(followed, Faults(latency=0.01))  # warm readers' proofs take time (see above)


def test_the_erased_gone_auditor_names_an_erase_that_forgets_a_files_earlier_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store whose erase knew a file by its current path alone would leave the texts it had
    under an earlier name in the commits and versions of that name: the auditor names them."""

    def forgetful(self: ErasedFile) -> None:
        self.files = self.lineages.files_named(self.path)
        self.names = {self.path}

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "alice's secret\n")
        await moved(world, "alice.md", "people/alice.md")
        await acked(world, "people/alice.md", "alice's new secret\n")
        await erased(world, "people/alice.md")
        return await audit_all(world, audit, frozenset())

    assert moving(script) == []
    monkeypatch.setattr(ErasedFile, "refresh", forgetful)
    found = moving(script)
    assert found and all(violation.startswith("[erased-gone]") for violation in found)
    assert any("alice's secret" in violation for violation in found)


def test_recover_finishes_an_erasure_by_the_path_erased_not_another_file_that_had_one_of_its_names() -> None:
    """Found with moves on (seed 17 at 0.3): the erasure of contract.md named alice.md too, an
    earlier name of its file; recover finished it through alice.md, the first path it named, and
    erased the texts of another file that had moved to alice.md and was deleted since."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "the erased file's text\n")
        await moved(world, "alice.md", "contract.md")
        await acked(world, "notes/a.md", "another file's text\n")
        version = await moved(world, "notes/a.md", "alice.md")
        await world.writers[0].store.delete("alice.md", expected=str(version), origin=Origin(principal_id="w0"))
        await erased(world, "contract.md")
        found = await audit_all(world, audit, frozenset())
        await MemoryAdmin(world.cold()).recover(None, origin=OPERATOR)
        return found + await audit_all(world, audit, frozenset())

    assert moving(script) == []


@pytest.mark.xfail(strict=True, reason="erase follows moves through the retained log only")
def test_an_erase_after_compaction_removes_the_texts_a_file_had_under_a_name_it_moved_from() -> None:
    """Found with moves on (seeds 34, 128 at 0.3): once compaction has taken a move out of the
    retained log, the checkpoint it starts from knows the file by its path alone, so `erase` of
    it leaves the texts it had under its earlier name in the commits, checkpoints and versions
    that hold them there (`erased-moved`; the docs promise every name it had)."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "alice's secret\n")
        await moved(world, "alice.md", "people/alice.md")
        for index in range(8):  # enough commits that compaction leaves the move behind
            await acked(world, "notes/a.md", f"note {index}\n")
        world.clock.advance(120)
        assert world.operator is not None
        await world.operator.store.compact()
        await erased(world, "people/alice.md")
        return await audit_all(world, audit, frozenset())

    assert moving(script) == []


async def verify_named(world: World) -> list[str]:
    """What `verify` names on the run's bucket, one line a problem."""
    return [f"[verify] {problem.key}: {problem.message}" for problem in await MemoryAdmin(world.cold()).verify()]


def test_verify_takes_an_erased_text_of_the_base_commit_for_its_files_under_a_later_name() -> None:
    """Found with moves on (seed 304 at 0.3): the commit the retained log starts from wrote a
    file's text at alice.md; the file moved to payroll.md, another took alice.md, and the erasure
    of payroll.md (naming it alone: alice.md is the other file's) erased the text. `verify` held
    the base commit's mark to its path alone and named it as no erasure's, which recover cannot
    repair; the retained log says which file the base held there and every name it took."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "notes/a.md", "a note\n")
        await acked(world, "alice.md", "alice's secret\n")
        await acked(world, "notes/b.md", "another note\n")
        world.clock.advance(120)
        assert world.operator is not None
        await world.operator.store.compact()  # the retained log starts from alice.md's commit
        await moved(world, "alice.md", "payroll.md")
        await acked(world, "alice.md", "another file\n")
        await erased(world, "payroll.md")
        return await verify_named(world)

    assert moving(script) == []


def test_verify_holds_no_file_to_an_erasure_that_named_its_path_for_another_file_moved_there() -> None:
    """Found with moves on (seed 528 at 0.3): the erasure of payroll.md named alice.md too, where
    its file had moved; `verify` took it for an erasure of every file alice.md ever held, and named
    the texts of another file written there (and deleted) as erased texts held again, which
    recover cannot repair and `erase` on alice.md would erase. An erasure is of the path it names first."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "alice.md", "alice's first file\n")
        await erased(world, "alice.md")
        version = await acked(world, "alice.md", "alice's second file\n")
        await world.writers[0].store.delete("alice.md", expected=str(version), origin=Origin(principal_id="w0"))
        await acked(world, "payroll.md", "the payroll\n")
        await moved(world, "payroll.md", "alice.md")
        await erased(world, "payroll.md")
        return await verify_named(world)

    assert moving(script) == []


@pytest.mark.xfail(strict=True, reason="import keeps to the paths an erasure names, not to its file's other names")
def test_an_import_brings_no_erased_text_back_under_a_name_its_file_left() -> None:
    """Found with moves on (seed 834 at 0.3): the erasure of contract.md named it alone (its file's
    earlier name, notes/a.md, was another file's by then), so an import of an export made before
    wrote the erased text back at notes/a.md; without moves the erased path is left as it is."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "notes/a.md", "the erased text\n")
        store = world.writers[0].store
        export = {entry.path: (await store.read(entry.path)).text for entry in await store.list()}
        await moved(world, "notes/a.md", "contract.md")
        await acked(world, "notes/a.md", "another file\n")
        await erased(world, "contract.md")
        assert world.operator is not None
        await MemoryAdmin(world.operator.store).put_files(export, replace=False, origin=OPERATOR)
        return await audit_all(world, audit, frozenset())

    assert moving(script) == []


def test_recover_finishes_no_erasure_over_a_file_that_took_its_path_after_it() -> None:
    """Found with moves on (seed 2964 at 0.3): a file written before the erasure of payroll.md
    moved there after it (and was deleted); recover, finishing the erasure through payroll.md,
    took the file for one the erasure had erased (its every text older than the erasure) and
    erased its texts. A file written there after the erasure was kept out already (seed 303)."""

    async def script(world: World, audit: AuditState) -> list[str]:
        await acked(world, "payroll.md", "the erased payroll\n")
        await acked(world, "contract.md", "the contract\n")
        await erased(world, "payroll.md")
        version = await moved(world, "contract.md", "payroll.md")
        await world.writers[0].store.delete("payroll.md", expected=str(version), origin=Origin(principal_id="w0"))
        found = await audit_all(world, audit, frozenset())
        await MemoryAdmin(world.cold()).recover(None, origin=OPERATOR)
        return found + await audit_all(world, audit, frozenset())

    assert moving(script) == []
