"""Real OS processes racing on one memory: no lost update, no write skew, gap-free seqs."""

from __future__ import annotations

from pathlib import Path

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import open_store
from bucket_memory.format.changes import Write
from bucket_memory.format.codec import Commit
from bucket_memory.state.state import State

from .conftest import fresh_memory_url
from .helpers import replay
from .races import increment, run_processes, toggle

PROCESSES = 4


async def logged(url: str) -> tuple[State, list[Commit]]:
    async with open_store(url) as store:
        return await replay(store.objects)


@pytest.fixture(
    params=["s3", pytest.param("gcs", marks=pytest.mark.slow), pytest.param("local", marks=pytest.mark.slow)]
)
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """S3 in `make test` (local races run in test_linearizable too); GCS and local in `make test-slow`."""
    return fresh_memory_url(request, tmp_path)


async def test_concurrent_increments_lose_no_update(memory_url: str) -> None:
    rounds = 8
    retries = run_processes(increment, [(memory_url, rounds)] * PROCESSES)
    # Each round every process read the same value, so all but one lost the first compare-and-swap.
    assert sum(retries) >= rounds * (PROCESSES - 1)  # type: ignore[arg-type]
    state, commits = await logged(memory_url)
    assert state.files["counter"].text == str(PROCESSES * rounds)
    # Every commit is one increment of the value before it: no update was written over.
    values = [int(change.text or "") for commit in commits for change in commit.changes if isinstance(change, Write)]
    assert values == list(range(1, PROCESSES * rounds + 1))
    assert [commit.seq for commit in commits] == list(range(1, len(commits) + 1))


async def test_dependencies_prevent_write_skew(memory_url: str) -> None:
    async with open_store(memory_url) as seed:
        for name in ("x", "y"):
            await seed.write(name, "off", expected=None, origin=Origin())
        fmt = seed.format
    committed = run_processes(toggle, [(memory_url, "x", "y", 10), (memory_url, "y", "x", 10)] * (PROCESSES // 2))
    assert sum(committed) > 0  # type: ignore[arg-type]
    _, commits = await logged(memory_url)
    state = State(format=fmt)
    for commit in commits:
        state.apply(commit, "replay")
        on = {path for path, live in state.files.items() if live.text == "on"}
        assert on != {"x", "y"}, f"write skew at commit {commit.seq}: both turned on"
