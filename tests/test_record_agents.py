"""Record memory with the real harness and in racing processes: a record one agent adds is
recalled in another agent's next run, and many processes adding and updating records lose
none of the acknowledged writes, the last writer winning per record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from examples.record_agents import recall, remember

from bucket_memory import MemoryAdmin, open_record_store

from .conftest import fresh_memory_url
from .helpers import fresh_processes
from .races import run_processes
from .record_races import add_and_update

SLOW = pytest.mark.slow


@pytest.fixture(params=["local", pytest.param("s3", marks=SLOW), pytest.param("gcs", marks=SLOW)])
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A local memory in `make test` (the buckets in `make test-slow`: the harness on S3 runs in
    test_deploy too); each agent is a process that imports the harness, so the rest run as slow."""
    return fresh_memory_url(request, tmp_path)


@SLOW  # 25 s of harness processes; the file memory's conversations run in make test
def test_a_record_one_agent_adds_is_recalled_in_anothers_run(memory_url: str) -> None:
    with fresh_processes(3, importing="examples.record_agents") as (adder, asker, stranger):
        (added,) = adder.submit(remember, memory_url, "The team drinks green tea at standup.", "ada").result(180)
        added = json.loads(added) if isinstance(added, str) else added
        assert "error" not in added, added
        (block,) = asker.submit(recall, memory_url, "Which tea should I bring to standup?").result(180)
        assert "green tea" in block and 'memory="facts"' in block
        assert stranger.submit(recall, memory_url, "What is the capital of Peru?").result(180) == []


async def test_racing_processes_lose_no_record_and_the_last_writer_wins(memory_url: str) -> None:
    async with open_record_store(memory_url) as store:
        shared = [(await store.add(f"shared fact {n}")).id for n in range(2)]
    workers, rounds = ["w1", "w2", "w3"], 4
    reports = run_processes(add_and_update, [(memory_url, worker, shared, rounds) for worker in workers])
    acknowledged = [entry for report in reports for entry in report]  # type: ignore[attr-defined]
    async with open_record_store(memory_url) as store:
        records = {record.id: record.text for record in (await store.list(limit=100)).records}
        admin = MemoryAdmin(store.files)
        for kind, record_id, text in acknowledged:
            if kind == "added":
                assert records[record_id] == text  # no acknowledged add lost or overwritten
        for record_id in shared:
            history = await admin.revisions(f"{record_id}.json")
            updates = [text for kind, rid, text in acknowledged if kind == "updated" and rid == record_id]
            assert len(history) == 1 + len(updates) == 1 + len(workers) * rounds  # every update landed once
            newest = json.loads((await admin.read_at(f"{record_id}.json", history[0].version)).text)["text"]
            assert records[record_id] == newest  # the last writer in the log wins
    assert len(records) == len(shared) + len(workers) * rounds
