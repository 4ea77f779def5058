"""Real OS processes racing on one memory: no lost update, no write skew, gap-free seqs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore
from bucket_memory.log import State
from bucket_memory.objects import ObjectStore

from .helpers import replay
from .races import increment, run_processes, toggle

type Target = tuple[str, Callable[[], ObjectStore]]

PROCESSES = 4


@pytest.fixture
def local_memory(tmp_path: pytest.TempPathFactory) -> Target:
    from bucket_memory.objects import LocalObjectStore

    root = tmp_path / "memory"  # type: ignore[operator]
    return str(root), lambda: LocalObjectStore(root)


async def test_concurrent_increments_lose_no_update(local_memory: Target) -> None:
    url, objects = local_memory
    rounds = 12
    retries = run_processes(increment, [(url, rounds)] * PROCESSES)
    # Each round all but one process lose the first compare-and-swap.
    assert sum(retries) >= rounds * (PROCESSES - 1)  # type: ignore[arg-type]
    state, commits = await replay(objects())
    assert state.files["counter"].text == str(PROCESSES * rounds)
    # Every commit is one increment of the value before it: no update was written over.
    values = [int(change.text) for commit in commits for change in commit.changes]  # type: ignore[union-attr]
    assert values == list(range(1, PROCESSES * rounds + 1))
    assert [commit.seq for commit in commits] == list(range(1, len(commits) + 1))


async def test_dependencies_prevent_write_skew(local_memory: Target) -> None:
    url, objects = local_memory
    seed = LogFileStore(objects())
    for name in ("x", "y"):
        await seed.write(name, "off", expected=None, origin=Origin())
    committed = run_processes(toggle, [(url, "x", "y", 15), (url, "y", "x", 15)] * (PROCESSES // 2))
    assert sum(committed) > 0  # type: ignore[arg-type]
    _, commits = await replay(objects())
    state = State(format=seed.format)
    for commit in commits:
        state.apply(commit, "replay")
        on = {path for path, live in state.files.items() if live.text == "on"}
        assert on != {"x", "y"}, f"write skew at commit {commit.seq}: both turned on"
