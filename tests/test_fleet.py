"""Fleet commit: intents published under pending/, folded into whoever commits next, settled once.

What a broken implementation would get wrong: an intent applied twice or never, an author told
something its log does not prove, a forged or foreign intent or run taken in, an uncontended
writer paying for intents, a catch-up that reads every commit, an erased text left in a copy.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Changes, FileFormat, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.fleet import pending as pending_module
from bucket_memory.fleet.intents import MAX_INTENT_BYTES, Intent
from bucket_memory.fleet.waiting import KEPT_READ, Replan, Settled, Waiting
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.changes import Fold, Write
from bucket_memory.format.codec import Commit
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.wire_values import (
    LOG_PREFIX,
    PENDING_PREFIX,
    checkpoint_key,
    intent_key,
    log_key,
    run_key,
    run_seq,
)
from bucket_memory.log import reader as reader_module
from bucket_memory.log import runs as runs_module
from bucket_memory.log.reader import LogReader
from bucket_memory.log.runs import RUN_EVERY, Run
from bucket_memory.objects.interface import CREATE, ObjectInfo, ObjectStore
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.state.folds import FOLD_WINDOW
from bucket_memory.state.operations import WriteOp
from bucket_memory.state.state import State
from bucket_memory.testing.faults import Faults, FaultyObjectStore
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .helpers import replay
from .linearizability import check
from .races import random_history, run_processes
from .test_linearizable import FOLDED, run_random

ORIGIN = Origin(run_id="fleet")
AUTHOR = Origin(run_id="author", tool_call_id="call-1")
QUOTA = 32 * 1024 * 1024


def contend(store: LogFileStore) -> None:
    """Make the store's next writes go through intents, as after a lost race."""
    store._log.head.traffic.lost_at = store.options.clock()


async def publish(objects: ObjectStore, intent: Intent) -> None:
    await objects.put(intent.key, intent.encode(), CREATE)


def an_intent(path: str, text: str, *, base: int, genesis: str | None, expected: str | None = None) -> Intent:
    operation = WriteOp(path=path, text=text, expected=expected, max_bytes=QUOTA)
    return Intent.create(operation, AUTHOR, base=base, genesis=genesis, made=time.time() - 1)


async def pending(objects: ObjectStore) -> list[str]:
    return [info.key for info in await objects.list(PENDING_PREFIX)]


async def test_an_uncontended_writer_publishes_no_intent() -> None:
    counted = FaultyObjectStore(MemoryObjectStore())
    store = LogFileStore(counted)
    for number in range(5):
        await store.write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    assert counted.calls["create"] == 5 and counted.calls["list"] <= 2
    assert await pending(counted) == []
    _, commits = await replay(counted)
    assert all(commit.folded is None and commit.format == 3 for commit in commits)


async def test_a_lost_race_goes_on_as_an_intent_its_author_settles() -> None:
    objects = MemoryObjectStore()
    mine, other = LogFileStore(objects), LogFileStore(objects)
    await mine.list()
    await other.write("theirs.md", "t", expected=None, origin=ORIGIN)
    version = await mine.write("mine.md", "m", expected=None, origin=AUTHOR)  # loses at 1, then an intent
    state, commits = await replay(objects)
    assert version == "2" and state.files["mine.md"].text == "m"
    (fold,) = commits[1].folded or ()
    assert commits[1].format == 4 and fold.outcome == "applied" and fold.base == 1
    assert await mine.read("mine.md") == await other.read("mine.md")
    await mine.settle()
    assert await pending(objects) == [], "the folder deletes the intents it settled"


async def test_another_process_folds_a_published_intent_exactly_once() -> None:
    """An intent whose author went away (a Lambda frozen mid-write) is folded by the next writer to
    race for the key, attributed to its author, and never again."""
    objects = MemoryObjectStore()
    folder = LogFileStore(objects)
    await folder.write("seed.md", "s", expected=None, origin=ORIGIN)
    genesis = (await folder.state(proven=True)).genesis
    orphan = an_intent("orphan.md", "from a frozen author", base=1, genesis=genesis)
    await publish(objects, orphan)
    contend(folder)
    await folder.write("next.md", "n", expected=None, origin=ORIGIN)
    await folder.settle()
    state, commits = await replay(objects)
    assert state.files["orphan.md"].text == "from a frozen author"
    settled = [(commit.seq, fold) for commit in commits for fold in commit.folded or () if fold.id == orphan.id]
    assert len(settled) == 1 and settled[0][1].outcome == "applied"
    change = next(c for c in commits[settled[0][0] - 1].changes if isinstance(c, Write) and c.path == "orphan.md")
    assert (change.origin or commits[settled[0][0] - 1].origin) == AUTHOR
    # Published again (a transport's late resend): settled in the window, so never applied twice.
    await publish(objects, orphan)
    contend(folder)
    await folder.write("later.md", "l", expected=None, origin=ORIGIN)
    _, again = await replay(objects)
    assert sum(1 for commit in again for fold in commit.folded or () if fold.id == orphan.id) == 1


async def test_an_intent_its_checks_refuse_is_settled_as_refused_or_unchanged() -> None:
    objects = MemoryObjectStore()
    folder = LogFileStore(objects)
    await folder.write("f.md", "same", expected=None, origin=ORIGIN)
    genesis = (await folder.state(proven=True)).genesis
    stale = an_intent("f.md", "over a version long gone", base=1, genesis=genesis, expected="99")
    unchanged = an_intent("f.md", "same", base=1, genesis=genesis, expected="1")
    for intent in (stale, unchanged):
        await publish(objects, intent)
    contend(folder)
    await folder.write("g.md", "g", expected=None, origin=ORIGIN)
    state, commits = await replay(objects)
    folds = {fold.id: fold for commit in commits for fold in commit.folded or ()}
    assert folds[stale.id].outcome == "refused" and folds[stale.id].code == "version_mismatch"
    assert folds[unchanged.id].outcome == "unchanged" and folds[unchanged.id].version == 1
    assert state.files["f.md"].text == "same" and state.files["f.md"].version == 1


def test_a_commit_that_settles_an_intent_twice_or_outside_its_window_is_void() -> None:
    """No store makes such a commit; every reader skips it alike (its changes too), and the log goes on."""
    state = State(format=FileFormat())

    def commit(seq: int, *folds: Fold) -> Commit:
        return Commit.create(seq, state.head_hash, (Write(path=f"{seq}.md", text="x"),), ORIGIN, at=0, folded=folds)

    once = Fold(id="ab" * 16, intent="0" * 64, base=0, outcome="applied")
    assert state.apply(commit(1, once), "t") is None
    void = state.apply(commit(2, once), "t")
    assert void is not None and "again" in void.reason and "2.md" not in state.files
    assert state.folds.settled == {once.id: 1} and state.head == 2
    late = Fold(id="cd" * 16, intent="0" * 64, base=0, outcome="applied")
    for seq in range(3, FOLD_WINDOW + 2):
        state.apply(commit(seq), "t")
    for fold in (late, Fold(id="ef" * 16, intent="0" * 64, base=FOLD_WINDOW * 3, outcome="applied")):
        void = state.apply(commit(state.head + 1, fold), "t")
        assert void is not None and "outside its window" in void.reason and fold.id not in state.folds.settled


async def test_the_window_of_settled_intents_survives_a_checkpoint_and_a_cold_open() -> None:
    """A cold open from a checkpoint must still refuse to settle an intent a commit before the
    checkpoint settled: checkpoints keep the window."""
    objects = MemoryObjectStore()
    options = LogOptions(checkpoint_min_commits=2, checkpoint_max_commits=2)
    folder = LogFileStore(objects, options=options)
    await folder.write("seed.md", "s", expected=None, origin=ORIGIN)
    intent = an_intent("x.md", "x", base=1, genesis=(await folder.state(proven=True)).genesis)
    await publish(objects, intent)
    contend(folder)
    await folder.write("y.md", "y", expected=None, origin=ORIGIN)
    await folder.settle()
    cold = LogFileStore(objects, options=options)
    state = await cold.state(proven=True)
    assert intent.id in state.folds.settled and not state.folds.foldable(intent.id, intent.base, state.head + 1)


def test_an_intent_past_its_window_is_never_folded_and_compaction_deletes_it(tmp_path: Path) -> None:
    async def run() -> None:
        objects = LocalObjectStore(tmp_path / "memory")
        options = LogOptions(checkpoint_max_commits=FOLD_WINDOW + 4, grace_period=0, retain_commits=1, retain_seconds=0)
        store = LogFileStore(objects, options=options)
        await store.write("seed.md", "s", expected=None, origin=ORIGIN)
        dead = an_intent("dead.md", "never", base=0, genesis=None)  # base 0: its window ends at commit 32
        for number in range(FOLD_WINDOW + 3):
            await store.write(f"n{number}.md", "x", expected=None, origin=ORIGIN)
        await publish(objects, dead)
        contend(store)
        await store.write("last.md", "x", expected=None, origin=ORIGIN)
        assert "dead.md" not in {entry.path for entry in await LogFileStore(objects).list()}
        await store.housekeeper.compact()
        assert dead.key not in await pending(objects)

    asyncio.run(run())


@pytest.mark.parametrize(
    "forge",
    ["garbage", "another key", "too large", "another memory", "escaping path", "wrong kind"],
)
async def test_hostile_intents_are_never_folded(forge: str) -> None:
    """What a writer with PutObject under the prefix can put in pending/: nothing of it is applied,
    and no writer fails for it."""
    objects = MemoryObjectStore()
    folder = LogFileStore(objects)
    await folder.write("seed.md", "s", expected=None, origin=ORIGIN)
    genesis = (await folder.state(proven=True)).genesis
    honest = an_intent("evil.md", "evil", base=1, genesis=genesis)
    key, data = honest.key, honest.encode()
    match forge:
        case "garbage":
            data = b'{"kind":"intent"' + b"x" * 100
        case "another key":
            key = an_intent("evil.md", "evil", base=1, genesis=genesis).key
        case "too large":
            data = data[:-1] + b" " * MAX_INTENT_BYTES + b"}"
        case "another memory":
            data = an_intent("evil.md", "evil", base=1, genesis="ee" * 32).encode()
            key = Intent.model_validate_json(data).key
        case "escaping path":
            body = {key: value for key, value in json.loads(data).items() if key != "hash"}
            body["operation"] = {**body["operation"], "path": "../../etc/passwd"}
            data = canonical({**body, "hash": hashlib.sha256(canonical(body)).hexdigest()})
        case "wrong kind":
            commit = Commit.create(2, "00" * 32, (Write(path="evil.md", text="evil"),), ORIGIN, at=0)
            data = commit.encode()
    await objects.put(key, data, CREATE)
    contend(folder)
    await folder.write("next.md", "n", expected=None, origin=ORIGIN)
    state, commits = await replay(objects)
    assert "evil.md" not in state.files and "next.md" in state.files
    assert all(fold.id != honest.id for commit in commits for fold in commit.folded or ())


async def test_lost_replies_while_publishing_and_folding_settle_every_write_once() -> None:
    """The reply of every create under pending/ and log/ lost once (the object landed): each write
    is applied once, and its author is told so."""
    objects = MemoryObjectStore()

    def lose_first(operation: str, key: str, count: int) -> str | None:
        return "lose_reply" if operation == "create" and count % 3 == 1 else None

    stores = [LogFileStore(FaultyObjectStore(objects, Faults(script=lose_first), seed=n)) for n in range(4)]  # type: ignore[arg-type]
    for store in stores:
        await store.list()
        contend(store)

    async def write(number: int, store: LogFileStore) -> str:
        return await store.write(f"w{number}.md", str(number), expected=None, origin=Origin(tool_call_id=str(number)))

    versions = await asyncio.gather(*(write(n, stores[n % 4]) for n in range(12)))
    state, commits = await replay(objects)
    for number, version in enumerate(versions):
        assert state.files[f"w{number}.md"].version == int(version)
    written = [c.path for commit in commits for c in commit.changes if isinstance(c, Write)]
    assert sorted(written) == sorted(f"w{n}.md" for n in range(12)), "each write applied exactly once"


async def test_catching_up_reads_a_run_not_every_commit() -> None:
    objects = MemoryObjectStore()
    others = [LogFileStore(objects) for _ in range(2)]
    counted = FaultyObjectStore(objects)
    reader = LogFileStore(counted)
    await reader.list()
    for number in range(4 * RUN_EVERY + 1):  # two writers: each sees the other, so runs are written
        await others[number % 2].write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    for other in others:
        await other.settle()
    assert any(run_seq(key) is not None for key in objects.objects)
    counted.calls.clear()
    assert len(await reader.list()) == 4 * RUN_EVERY + 1
    assert counted.calls["get"] <= 1 + RUN_EVERY + 1, dict(counted.calls)  # probe, run, the commits from its seq


async def test_a_writer_holds_no_more_recent_commits_than_a_run_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commits a writer keeps for the runs it writes are bounded by the bytes a run holds, not
    only by their number: a fold's commits may be megabytes each (before: 64 of them, whatever their size)."""
    monkeypatch.setattr(runs_module, "RUN_BYTES", 4096)
    store = LogFileStore(MemoryObjectStore())
    for number in range(12):
        await store.write(f"{number}.md", "x" * 1000, expected=None, origin=ORIGIN)
    recent = store._log.head.recent
    assert 1 < len(recent) < 12 and sum(commit.encoded_size for commit in recent) <= 4096
    assert [commit.seq for commit in recent] == list(range(13 - len(recent), 13)), "the newest, in order"


@pytest.mark.parametrize("forge", ["another text", "another memory", "truncated"])
async def test_a_forged_run_is_passed_over_not_taken_for_the_log(forge: str) -> None:
    objects = MemoryObjectStore()
    writer = LogFileStore(objects)
    reader = LogFileStore(objects)
    await reader.list()
    for number in range(2 * RUN_EVERY):
        await writer.write(f"{number}.md", "true", expected=None, origin=ORIGIN)
    _, commits = await replay(objects)
    top = 2 * RUN_EVERY
    forged = list(commits[:top])
    if forge == "another text":
        # Re-chained from commit 1 with another text: hashes check, the log's own commit at `top` differs.
        prev = forged[0].hash
        for index in range(1, top):
            original = forged[index]
            changes = (Write(path=original.changes[0].path, text="forged"),)  # type: ignore[union-attr]
            forged[index] = Commit.create(original.seq, prev, changes, ORIGIN, at=0)
            prev = forged[index].hash
        data = Run.made(forged).encode()
    elif forge == "another memory":
        other = MemoryObjectStore()
        stranger = LogFileStore(other)
        for number in range(top):
            await stranger.write(f"{number}.md", "other", expected=None, origin=ORIGIN)
        _, theirs = await replay(other)
        data = Run.made(theirs).encode()
    else:
        data = Run.made(forged).encode()[:-10]
    await objects.put(run_key(top), data, CREATE)
    state = await reader.state(proven=True)
    assert {path: live.text for path, live in state.files.items()} == {f"{n}.md": "true" for n in range(top)}
    assert any("run" in problem.message for problem in await MemoryAdmin(writer).verify())


async def test_erase_deletes_the_intents_and_runs_that_spell_the_file() -> None:
    objects = VersionedMemoryObjectStore()
    writer, other = LogFileStore(objects), LogFileStore(objects)
    await writer.write("people/alice.md", "alice 4242-SECRET", expected=None, origin=ORIGIN)
    for number in range(2 * RUN_EVERY):
        await (writer, other)[number % 2].write(f"n{number}.md", "x", expected=None, origin=ORIGIN)
    for store in (writer, other):
        await store.settle()
    genesis = (await writer.state(proven=True)).genesis
    pending_write = an_intent("people/alice.md", "alice 4242-SECRET again", base=1, genesis=genesis, expected="0")
    await publish(objects, pending_write)
    assert any(run_seq(key) is not None for key in objects.objects)
    await MemoryAdmin(writer).erase("people/alice.md", origin=ORIGIN)
    for key, versions in objects.stored.items():
        for _, data, _ in versions:
            assert data is None or b"4242-SECRET" not in data, key


async def test_verify_reports_an_intent_no_writer_made() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    await objects.put(f"{PENDING_PREFIX}0000000000000-{0:020d}-{'ab' * 16}.json", b"not an intent", CREATE)
    await objects.put(f"{PENDING_PREFIX}notes.txt", b"x", CREATE)
    problems = {problem.key: problem.message for problem in await MemoryAdmin(store).verify()}
    assert len(problems) == 2 and all(key.startswith(PENDING_PREFIX) for key in problems)


@pytest.mark.parametrize("seed", range(2))
async def test_random_histories_through_intents_stay_linearizable(seed: int) -> None:
    """The linearizability suite's random clients and faults, eight stores on one memory: enough
    contention that commits fold intents, which the checker then holds to the history."""
    FOLDED.clear()
    await run_random(MemoryObjectStore(), 500 + seed, clients=8, operations=30)
    assert FOLDED and FOLDED[-1] > 0, "the history exercised no intent"


def test_processes_racing_through_intents_stay_linearizable(tmp_path: Path) -> None:
    """Separate OS processes on a local memory: every read sees every write acknowledged before
    it began (the checker), and some commits settled other processes' intents."""
    url = str(tmp_path / "memory")
    histories = run_processes(random_history, [(url, f"p{number}", 700 + number, 30) for number in range(6)])
    history = [operation for ops in histories for operation in ops]  # type: ignore[attr-defined]

    async def audit() -> list[Commit]:
        _, commits = await replay(LocalObjectStore(url))
        return commits

    commits = asyncio.run(audit())
    problems = check(history, commits)
    assert not problems, "\n".join(problems[:20])
    assert any(commit.folded for commit in commits), "no commit settled an intent"


async def test_a_log_without_fleet_commit_never_publishes() -> None:
    objects = MemoryObjectStore()
    options = LogOptions(fleet_commit=False)
    stores = [LogFileStore(objects, options=options) for _ in range(4)]
    await asyncio.gather(*(store.write(f"{n}.md", "x", expected=None, origin=ORIGIN) for n, store in enumerate(stores)))
    assert await pending(objects) == []
    _, commits = await replay(objects)
    assert all(commit.format == 3 for commit in commits)


@pytest.mark.parametrize("kill_under", ["pending/", "log/"])
def test_a_writer_killed_mid_intent_or_mid_fold_leaves_every_write_once(kill_under: str, tmp_path: Path) -> None:
    """kill -9 of an author just after its intent landed, or of a folder just after its commit
    landed (before it deleted the intents or told anyone): the others go on, the killed write is
    applied once or never, and nothing acknowledged is lost or doubled."""
    import multiprocessing

    from .races import fleet_writer_killed

    url = str(tmp_path / "memory")

    async def seed() -> None:
        store = LogFileStore(LocalObjectStore(url))
        await store.write("seed.md", "s", expected=None, origin=ORIGIN)

    asyncio.run(seed())
    context = multiprocessing.get_context("spawn")
    victim = context.Process(target=fleet_writer_killed, args=(url, "victim", kill_under))
    victim.start()
    victim.join(timeout=120)
    assert victim.exitcode == -9, "killed at the point chosen"

    async def survivors() -> list[str]:
        stores = [LogFileStore(LocalObjectStore(url)) for _ in range(3)]
        for store in stores:
            await store.list()
            contend(store)
        return await asyncio.gather(
            *(store.write(f"s{n}.md", str(n), expected=None, origin=ORIGIN) for n, store in enumerate(stores))
        )

    versions = asyncio.run(survivors())
    state, commits = asyncio.run(replay(LocalObjectStore(url)))
    for number, version in enumerate(versions):
        assert state.files[f"s{number}.md"].version == int(version)
    written = [c.path for commit in commits for c in commit.changes if isinstance(c, Write)]
    assert len(written) == len(set(written)), "no write applied twice"
    # Its intent was folded by the survivors, or its own commit landed before it died: once either way.
    assert "victim.md" in state.files and written.count("victim.md") == 1


async def test_a_write_whose_head_was_staler_than_expected_is_published_once() -> None:
    """An author that publishes as it lists (its head seemed recent) and finds the head far behind
    keeps its one intent: a second one for the same write could be settled too, applying the write
    twice or answering a refusal for a write that landed (found by the benchmark's lognormal cell)."""
    objects = MemoryObjectStore()
    mine, other = LogFileStore(objects), LogFileStore(objects)
    await mine.list()
    for number in range(20):
        await other.write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    contend(mine)
    assert await mine.write("mine.md", "m", expected=None, origin=AUTHOR) == "21"
    _, commits = await replay(objects)
    folds = [fold for commit in commits for fold in commit.folded or ()]
    assert len(folds) == 1 and folds[0].base == 0 and folds[0].outcome == "applied"


async def test_a_write_planned_again_after_its_intent_was_refused_probes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """After another's commit refused its intent, an author proves its head (one GET) and plans the
    write again on it: that proof is since the new round began, so planning takes no second GET
    (the round's start was once taken after the probe, and every replan paid one more)."""
    counted = FaultyObjectStore(MemoryObjectStore())
    store = LogFileStore(counted)
    version = await store.write("a.md", "a", expected=None, origin=ORIGIN)
    gets: list[int] = []

    async def refused_once(operation: WriteOp, origin: Origin) -> Replan | Settled:
        gets.append(counted.calls["get"])
        return Replan() if len(gets) == 1 else Settled(7)

    monkeypatch.setattr(store.fleet, "_one_intent", refused_once)
    contend(store)
    assert await store.write("a.md", "b", expected=version, origin=AUTHOR) == "7"
    assert gets[1] - gets[0] == 1, "one probe between the refusal and the next round"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(502, 712))
async def test_random_histories_through_intents_stay_linearizable_at_scale(seed: int, tmp_path: Path) -> None:
    """`make test-slow`: 210 seeds, in memory and on a local directory by turns."""
    objects: ObjectStore = MemoryObjectStore() if seed % 2 else LocalObjectStore(tmp_path / "memory")
    await run_random(objects, seed, clients=8, operations=30)


async def test_two_intents_of_one_id_never_stop_a_fold() -> None:
    """A forged pair sharing an id (each alone valid) would make a commit settle one id twice,
    which no commit may: the folder keeps the oldest and writes go on (an attacker's review)."""
    objects = MemoryObjectStore()
    folder = LogFileStore(objects)
    await folder.write("seed.md", "s", expected=None, origin=ORIGIN)
    genesis = (await folder.state(proven=True)).genesis
    first = an_intent("a.md", "a", base=1, genesis=genesis)
    twin = Intent.signed(
        seq=1, id=first.id, made=first.made + 1, origin=AUTHOR, operation=first.operation, genesis=genesis
    )
    for intent in (first, twin):
        await publish(objects, intent)
    contend(folder)
    assert await folder.write("b.md", "b", expected=None, origin=ORIGIN) == "2"
    _, commits = await replay(objects)
    assert [fold.intent for fold in commits[1].folded or () if fold.id == first.id] == [first.hash]


def test_a_record_of_another_intent_with_our_id_is_not_our_outcome() -> None:
    """An attacker who swaps in a copy of a pending intent (same id, its own write) gets the copy
    folded; the author must not take that record for its write: its id is spent, so it plans again."""
    from bucket_memory.fleet.waiting import Replan, Settled
    from bucket_memory.fleet.waiting import outcome_of as _outcome

    ours = an_intent("mine.md", "mine", base=1, genesis=None)
    swapped = an_intent("mine.md", "theirs", base=1, genesis=None)
    record = Fold(id=ours.id, intent=swapped.hash, base=1, outcome="applied")
    assert _outcome(5, record, ours) == Replan()
    assert _outcome(5, record.model_copy(update={"intent": ours.hash}), ours) == Settled(5)


async def test_a_run_that_marks_a_text_erased_is_passed_over() -> None:
    """A sealed commit's hash does not cover `erased`: a run holding an erased change is one no
    writer makes (a writer forgets what it would pack at an erasure), so readers pass it over."""
    objects = MemoryObjectStore()
    writer, reader = LogFileStore(objects), LogFileStore(objects)
    await reader.list()
    for number in range(2 * RUN_EVERY):
        await writer.write(f"{number}.md", f"text {number}", expected=None, origin=ORIGIN)
    _, commits = await replay(objects)
    top = 2 * RUN_EVERY
    forged = [commit.redacted(lambda index, change: True, 7) if commit.seq == 3 else commit for commit in commits[:top]]
    await objects.put(run_key(top), Run.made(forged).encode(), CREATE)
    assert (await reader.read("2.md")).text == "text 2"


async def test_intents_naming_a_base_no_writer_has_seen_are_ignored_and_compacted() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects, options=LogOptions(checkpoint_max_commits=4, grace_period=0))
    await store.write("seed.md", "s", expected=None, origin=ORIGIN)
    garbage = an_intent("g.md", "g", base=10**19, genesis=None)
    await publish(objects, garbage)
    counted = FaultyObjectStore(objects)
    writer = LogFileStore(counted)
    await writer.list()
    contend(writer)
    counted.calls.clear()
    await writer.write("w.md", "w", expected=None, origin=ORIGIN)
    assert counted.calls["get"] <= 2, "no garbage intent read"
    await store.housekeeper.compact()
    assert await pending(objects) == []


class _Listing:
    """A store whose listings are recorded: the keys each returned, and how many were sent."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.keys, self.requests = inner, list[str](), 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def list(self, prefix: str, **bounds: Any) -> list[ObjectInfo]:
        found = await self.inner.list(prefix, **bounds)
        self.keys += [info.key for info in found]
        self.requests += 1
        return found


async def test_a_fold_lists_what_follows_a_commit_and_a_page_at_most_of_others(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold's listing names the commits after the head, the runs beside them and the intents, and
    nothing before the head, no checkpoint, no stray key, on every backend: one LIST where the
    server lists in key order and nothing else lies there. Another memory nested under the prefix
    (`notes/` sorts between `log/` and `pending/`, `zz/` after) adds no more than a page of keys to
    any listing (before: one listing from `log/<head>` took in every key that sorts after it)."""
    monkeypatch.setattr(reader_module, "TAIL_PAGE", 6, raising=False)
    intent = intent_key(1, 2, "a" * 32)
    stray = ["doctor/x.json", "pending/junk.json", "log-x/y.json", checkpoint_key(2)]
    for key in [log_key(1), log_key(2), log_key(3), run_key(3), intent, *stray]:
        await objects.put(key, b"{}", CREATE)
    listing = _Listing(objects)
    reader = LogReader(listing, format=FileFormat(), attempts=2)  # type: ignore[arg-type]

    async def tail_after(after: int) -> tuple[list[int], list[int], list[str]]:
        listing.keys.clear()
        tail = await reader.list_tail(after=after)
        others = [key for key in listing.keys if not key.startswith((LOG_PREFIX, PENDING_PREFIX))]
        assert len(others) <= 6, others
        return [seq for seq, _ in tail.commits], tail.runs, tail.pending

    assert await tail_after(1) == ([2, 3], [3], [intent])
    assert listing.requests == (1 if objects.ordered_listing else 2)
    for nested in ("notes/", "zz/"):
        for seq in range(1, 11):
            await objects.put(f"{nested}{log_key(seq)}", b"{}", CREATE)
    assert await tail_after(1) == ([2, 3], [3], [intent])
    assert await tail_after(0) == ([1, 2, 3], [3], [intent])
    assert (await tail_after(3))[0] == []


@pytest.mark.parametrize("value", ["no", 0, None, 1, "False"])
def test_fleet_commit_is_a_bool(value: object) -> None:
    """A truthy "no" would turn on the commits of format 4 that older readers refuse."""
    with pytest.raises(ValueError, match="fleet_commit must be True or False"):
        LogOptions(fleet_commit=value)  # type: ignore[arg-type]


async def test_an_author_whose_head_passed_its_window_unseen_finds_its_settlement() -> None:
    """The head of an author's process can move past its intent's window by other means (a fold's
    catch-up, a run, another write of the process) without the author reading the commit that
    settled it: that is no proof it was never applied. The author looks in the window first."""
    from bucket_memory.fleet.waiting import Replan, Settled
    from bucket_memory.fleet.waiting import Waiting as _Waiting

    objects = MemoryObjectStore()
    author, folder = LogFileStore(objects), LogFileStore(objects)
    await author.write("seed.md", "s", expected=None, origin=ORIGIN)
    await author.list()
    genesis = (await author.state(proven=True)).genesis
    mine = an_intent("mine.md", "the author's", base=1, genesis=genesis)
    await publish(objects, mine)
    contend(folder)
    await folder.write("first.md", "f", expected=None, origin=ORIGIN)  # folds it at 2
    for number in range(FOLD_WINDOW + 1):
        await folder.write(f"other-{number}.md", "o", expected=None, origin=ORIGIN)
    await author._log.head.catch_up()  # as another operation of the author's process would
    assert author._log.head.seq >= 1 + FOLD_WINDOW
    outcome = await author.fleet._wait(_Waiting(mine, known=1), [])
    assert outcome == Settled(2) and not isinstance(outcome, Replan)


async def _seeded_with_orphan(objects: ObjectStore) -> Intent:
    """A memory of one commit, and the intent of a frozen author on it, to be published last."""
    await LogFileStore(objects).write("seed.md", "s", expected=None, origin=ORIGIN)
    genesis = (await LogFileStore(objects).state(proven=True)).genesis
    return an_intent("orphan.md", "from a frozen author", base=1, genesis=genesis)


def _settled_ids(commits: list[Commit]) -> dict[str, int]:
    return {fold.id: commit.seq for commit in commits for fold in commit.folded or ()}


def _numbered(settled: dict[str, int]) -> list[str]:
    """The settled ids among those the tests give their filler objects (`f"{number:032x}"`)."""
    return [intent_id for intent_id in settled if intent_id.startswith("0" * 29)]


async def test_garbage_under_pending_is_read_once_and_never_takes_a_fold_s_place() -> None:
    """300 objects at intent keys that sort first (made in 1970, a live base) and are no intent of
    this memory: 7 bytes that do not decode, or intents of another memory. The first fold reads each
    once and deletes it, and still folds the frozen author's intent behind them; the next writer
    reads none of them (before: every fold read the first 256 and folded nothing past them)."""
    objects = MemoryObjectStore()
    orphan = await _seeded_with_orphan(objects)
    for number in range(250):
        await objects.put(intent_key(number, 1, f"{number:032x}"), b"garbage", CREATE)
    for number in range(250, 300):
        foreign = Intent.signed(
            seq=1, id=f"{number:032x}", made=number, origin=AUTHOR, operation=orphan.operation, genesis="ee" * 32
        )
        await publish(objects, foreign)
    await publish(objects, orphan)
    counted = FaultyObjectStore(objects)
    folder = LogFileStore(counted)
    await folder.list()
    contend(folder)
    counted.calls.clear()
    assert await folder.write("next.md", "n", expected=None, origin=ORIGIN) == "2"
    await folder.settle()
    _, commits = await replay(objects)
    settled = _settled_ids(commits)
    assert settled[orphan.id] == 2 and not _numbered(settled), "the orphan is folded by the first commit"
    assert counted.calls["get"] <= 300 + 4, dict(counted.calls)
    assert await pending(objects) == [], "what no commit can settle is deleted"
    later = FaultyObjectStore(objects)
    writer = LogFileStore(later)
    await writer.list()
    contend(writer)
    later.calls.clear()
    await writer.write("later.md", "l", expected=None, origin=ORIGIN)
    assert later.calls["get"] <= 4, dict(later.calls)


async def test_intents_that_name_no_memory_are_read_once_never_folded_and_never_deleted() -> None:
    """An intent without a genesis is made on an empty memory (base 0) or by a reader that does not
    know its memory's: a folder that knows it never folds one of a later base (it may be another
    memory's), remembers it after one read, and leaves it for its author to fold (before: folded
    into any memory)."""
    objects = MemoryObjectStore()
    orphan = await _seeded_with_orphan(objects)
    for number in range(300):
        operation = WriteOp(path=f"x{number}.md", text="from somewhere", expected=None, max_bytes=QUOTA)
        await publish(
            objects, Intent.signed(seq=1, id=f"{number:032x}", made=number, origin=AUTHOR, operation=operation)
        )
    await publish(objects, orphan)
    counted = FaultyObjectStore(objects)
    folder = LogFileStore(counted)
    await folder.list()
    for name in ("a.md", "b.md"):
        contend(folder)
        counted.calls.clear()
        await folder.write(name, name, expected=None, origin=ORIGIN)
        assert counted.calls["get"] <= (300 if name == "a.md" else 0) + 4, dict(counted.calls)
    await folder.settle()
    state, commits = await replay(objects)
    settled = _settled_ids(commits)
    assert settled[orphan.id] == 2 and not _numbered(settled) and not any(path.startswith("x") for path in state.files)
    assert len(await pending(objects)) == 300, "an intent a reader of this memory may have made is left"


async def test_an_intent_is_folded_under_the_folder_s_quota_not_its_own() -> None:
    """An intent names its author's `max_bytes`: one that names a larger quota than the folder's
    is planned under the folder's (before: a forged quota filled the memory past the folder's)."""
    objects = MemoryObjectStore()
    small = LogFileStore(objects, max_bytes=1000)
    await small.write("seed.md", "s", expected=None, origin=ORIGIN)
    genesis = (await small.state(proven=True)).genesis
    greedy = an_intent("big.md", "x" * 2000, base=1, genesis=genesis)
    await publish(objects, greedy)
    contend(small)
    await small.write("next.md", "n", expected=None, origin=ORIGIN)
    state, commits = await replay(objects)
    (fold,) = [fold for commit in commits for fold in commit.folded or () if fold.id == greedy.id]
    assert fold.outcome == "refused" and fold.code == "memory_full" and "big.md" not in state.files


async def test_a_commit_that_only_settles_refused_intents_moves_no_change_cursor() -> None:
    """A fold whose intents were all refused or left their files unchanged still commits (its records
    tell their authors): nothing changed, so a caller's cursor stays where it was (before: the head's
    cursor was answered with no paths, as if the caller had seen a commit it had not)."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    cursor = (await store.changes(None)).cursor
    genesis = (await store.state(proven=True)).genesis
    await publish(objects, an_intent("a.md", "over a version long gone", base=1, genesis=genesis, expected="99"))
    contend(store)
    assert await store.write("a.md", "a", expected="1", origin=ORIGIN) == "1"
    _, commits = await replay(objects)
    assert commits[-1].seq == 2 and commits[-1].changes == () and len(commits[-1].folded or ()) == 2
    assert await store.changes(cursor) == Changes(cursor=cursor, paths=())
    assert await LogFileStore(objects).changes(cursor) == Changes(cursor=cursor, paths=())
    await store.write("b.md", "b", expected=None, origin=ORIGIN)
    assert await store.changes(cursor) == Changes(cursor=(await store.changes(None)).cursor, paths=("b.md",))


async def test_a_fresh_process_on_s3_express_counts_no_traffic_from_its_cold_start() -> None:
    """On a store listed unordered (S3 Express), a cold start loads the commits after the checkpoint
    by GETs; those are history, not others writing now. Counted as traffic, they made a fresh
    process's writes after its first read take the intent path (an intent's create, a listing and
    a fold: three round trips, not one PUT) though no one else writes."""
    objects = MemoryObjectStore(ordered_listing=False)
    gone = LogFileStore(objects)
    for number in range(10):
        await gone.write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    now = [0.0]
    counted = FaultyObjectStore(objects)
    fresh = LogFileStore(counted, options=LogOptions(clock=lambda: now[0]))
    assert len(await fresh.list()) == 10  # a cold start: commits 1 to 10 read by GETs
    now[0] = 1.0  # a second later, as its agent thinks
    counted.calls.clear()
    assert await fresh.write("mine.md", "m", expected=None, origin=AUTHOR) == "11"
    assert counted.calls["create"] == 1 and await pending(objects) == [], "one PUT, no intent"


class _Outrun(FaultyObjectStore):
    """A store on which another writer's commit lands at `seq` just before our first create there."""

    def __init__(self, inner: ObjectStore, seq: int) -> None:
        super().__init__(inner)
        self.rival: LogFileStore | None = LogFileStore(inner, options=LogOptions(fleet_commit=False))
        self.seq, self.pending_reads = seq, 0

    async def get(self, key: str) -> bytes | None:
        self.pending_reads += key.startswith(PENDING_PREFIX)
        return await super().get(key)

    async def put(self, key: str, data: bytes, mode: Any) -> None:
        if key == log_key(self.seq) and self.rival is not None:
            rival, self.rival = self.rival, None
            await rival.write("rival.md", "r", expected=None, origin=ORIGIN)
        await super().put(key, data, mode)


async def test_a_fold_that_lost_its_race_reads_no_intent_again() -> None:
    """Intents are created once at a key only their author uses and never change: a fold that lost
    its key to another writer (who settled none of them) folds them into the next with no second
    read (before: every fold read every pending intent again, one GET each)."""
    objects = MemoryObjectStore()
    await _seeded_with_orphan(objects)
    genesis = (await LogFileStore(objects).state(proven=True)).genesis
    orphans = [an_intent(f"orphan-{number}.md", "o", base=1, genesis=genesis) for number in range(3)]
    for orphan in orphans:
        await publish(objects, orphan)
    counted = _Outrun(objects, seq=2)
    folder = LogFileStore(counted)
    await folder.list()
    contend(folder)
    assert await folder.write("next.md", "n", expected=None, origin=ORIGIN) == "3"
    _, commits = await replay(objects)
    assert commits[1].changes[0].path == "rival.md" and not commits[1].folded  # type: ignore[union-attr]
    assert {fold.id for fold in commits[2].folded or ()} >= {orphan.id for orphan in orphans}
    assert counted.pending_reads == len(orphans), "each pending intent read once"


async def test_a_fold_does_not_read_again_the_commits_its_author_polled() -> None:
    """An author polls the commits after its base while it waits; its head, further behind, cannot
    take them. The fold's catch-up applies them from what was read, still checked link by link in
    the hash chain (before: every one was read again); what was not read, or does not chain, is read
    or refused as before."""
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects)
    mine, other = LogFileStore(counted), LogFileStore(objects)
    await mine.list()
    for number in range(4):
        await other.write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    _, commits = await replay(objects)
    head = mine._log.head
    tail = await mine._log.reader.list_tail(after=0)
    polled = {commit.seq: commit for commit in commits[2:]}  # 3 and 4, as polls while waiting read them
    counted.calls.clear()
    await head.follow(tail.commits, tail.runs, 0.0, read=polled)
    assert head.seq == 4 and counted.calls["get"] == 2, "no run: those not polled read one by one"
    head.forget()
    await head.loaded()
    assert head.seq == 4
    for number in range(4, 8):
        await other.write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    _, commits = await replay(objects)
    waiting = Waiting(an_intent("mine.md", "m", base=4, genesis=commits[0].hash), known=4)
    for commit in commits[4:]:
        waiting.note(commit)  # as the author's polls read them
    counted.calls.clear()
    async with mine._log.exclusive():
        assert await mine.fleet.pending.caught_up_and_read(waiting, 0.05, impatient=True) == []
    assert head.seq == 8 and counted.calls["get"] == 0, "every commit at hand: none read again"
    assert (await mine.read("7.md")).text == "x"
    forged = commits[6].model_copy(update={"seq": 9})
    await other.write("8.md", "x", expected=None, origin=ORIGIN)
    tail = await mine._log.reader.list_tail(after=8)
    with pytest.raises(CorruptObjectError):
        await head.follow(tail.commits, tail.runs, 0.0, read={9: forged})


@pytest.mark.parametrize("run", ["genuine", "forged"])
async def test_a_polled_commit_vouches_for_a_run_without_a_second_read(run: str) -> None:
    """A run is trusted because the log's own commit at its seq holds its last commit. One an author
    polled while it waited is that commit, read from its key: the catch-up reads the run alone
    (before: the commit at the run's seq again). A forged run still fails the comparison and the
    commits are read one by one."""
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects)
    mine, other = LogFileStore(counted), LogFileStore(objects)
    await mine.list()
    top = 2 * RUN_EVERY
    for number in range(top):
        await other.write(f"{number}.md", "true", expected=None, origin=ORIGIN)
    _, commits = await replay(objects)
    packed = list(commits[:top])
    if run == "forged":  # re-chained from commit 1 with another text: the log's commit at `top` differs
        prev = packed[0].hash
        for index in range(1, top):
            changes = (Write(path=f"{index}.md", text="forged"),)
            packed[index] = Commit.create(index + 1, prev, changes, ORIGIN, at=0)
            prev = packed[index].hash
    await objects.put(run_key(top), Run.made(packed).encode(), CREATE)
    head = mine._log.head
    tail = await mine._log.reader.list_tail(after=0)
    counted.calls.clear()
    await head.follow(tail.commits, tail.runs, 0.0, read={top: commits[top - 1]})
    assert head.seq == top
    assert counted.calls["get"] == (1 if run == "genuine" else 1 + top - 1), dict(counted.calls)
    assert (await mine.read("0.md")).text == "true"


async def test_an_author_keeps_only_the_newest_commits_it_polled() -> None:
    """A fold's commit may hold megabytes of others' texts: an author keeps the newest `KEPT_READ`
    of those it read while waiting for its fold's catch-up, not every one its window passed."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    for number in range(KEPT_READ + 4):
        await store.write(f"{number}.md", "x", expected=None, origin=ORIGIN)
    _, commits = await replay(objects)
    waiting = Waiting(an_intent("mine.md", "m", base=0, genesis=commits[0].hash), known=0)
    for commit in commits:
        waiting.note(commit)
    assert sorted(waiting.read) == [commit.seq for commit in commits[-KEPT_READ:]]


async def test_the_intents_a_process_keeps_are_no_more_than_a_fold_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process keeps the intents it read while they are listed, but no more bytes of them than a
    fold takes (`FOLD_BYTES`): intents of megabytes, listed by the hundred, are read again rather
    than held (before the bound: every one read was held)."""
    objects = MemoryObjectStore()
    orphan = await _seeded_with_orphan(objects)
    big = [an_intent(f"big-{number}.md", "x" * 60_000, base=1, genesis=orphan.genesis) for number in range(6)]
    for intent in big:
        await publish(objects, intent)
    monkeypatch.setattr(pending_module, "FOLD_BYTES", 3 * big[0].encoded_size)
    folder = LogFileStore(objects)
    await folder.list()
    contend(folder)
    await folder.write("next.md", "n", expected=None, origin=ORIGIN)
    kept = folder.fleet.pending._read_here
    assert 0 < len(kept) <= 3 and sum(intent.encoded_size for intent in kept.values()) <= 3 * big[0].encoded_size
