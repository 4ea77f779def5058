"""Reading a memory's log back, as an auditor would, for the tests' invariants."""

from __future__ import annotations

from a13n_harness.providers.memory import FileFormat

from bucket_memory.codec import LOG_PREFIX, Commit, key_seq
from bucket_memory.objects import ObjectStore
from bucket_memory.state import State


async def replay(objects: ObjectStore, fmt: FileFormat | None = None) -> tuple[State, list[Commit]]:
    """Every commit in the log, checked gap-free and chained, and the state they build from empty."""
    state = State(format=fmt or FileFormat())
    commits: list[Commit] = []
    for info in await objects.list(LOG_PREFIX):
        assert key_seq(info.key) == state.head + 1, f"gap or foreign key at {info.key}"
        data = await objects.get(info.key)
        assert data is not None
        commit = Commit.decode(objects.location, info.key, data)
        state.apply(commit, objects.location)
        commits.append(commit)
    return state, commits


def cli(*arguments: str, expect: int = 0, given: str | None = None) -> str:
    """Run the `bucket-memory` command in this process; what it printed, stdout and stderr together."""
    from typer.testing import CliRunner

    from bucket_memory.cli import app

    result = CliRunner().invoke(app, list(arguments), input=given)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result.output
