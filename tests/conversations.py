"""Conversations with the real harness, each run in its own OS process on one shared memory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from a13n_harness.capabilities.memory import MemoryCursors
from a13n_harness.providers.memory import Origin
from a13n_harness.state import HarnessState
from examples.agents import Step, Transcript, call, in_order, memory_agent, scripted_model

from bucket_memory import open_store


def converse(url: str, saved: str, steps_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run one turn of a conversation whose state and memory cursors persist in the file `saved`."""
    return asyncio.run(_converse(url, Path(saved), STEPS[steps_name](**arguments)))


async def _converse(url: str, saved: Path, steps: list[Step]) -> dict[str, Any]:
    persisted = json.loads(saved.read_text()) if saved.exists() else {}  # noqa: ASYNC240 (a small local file)
    cursors = MemoryCursors(persisted.get("cursors"))
    previous = HarnessState.model_validate_json(persisted["state"]) if "state" in persisted else None
    transcript = Transcript()
    async with open_store(url) as store:
        agent = memory_agent(
            store, scripted_model(in_order(steps), transcript), cursors=cursors, origin=Origin(principal_id=saved.stem)
        )
        result = await agent.run("Keep our notes current.", previous_state=previous)
    result.output_or_raise()
    assert result.state is not None
    conversation = {"state": result.state.model_dump_json(), "cursors": cursors.snapshot()}
    saved.write_text(json.dumps(conversation))  # noqa: ASYNC240 (a small local file)
    return {"context": transcript.memory_context(), "answers": [_plain(answer) for answer in transcript.answers]}


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def bob_reads() -> list[Step]:
    return [call("view", path=""), call("view", path="shared.md")]


def alice_writes() -> list[Step]:
    return [
        call("create", path="notes/plan.md", content="ship the bucket store\n"),
        call("edit", path="shared.md", old_string="draft", new_string="final"),
    ]


def alice_approves() -> list[Step]:
    return [call("edit", path="shared.md", old_string="final", new_string="approved")]


def bob_acts_on_stale_reads(version: str, url: str, alice: str) -> list[Step]:
    """Delete at the version read last run; then read, let Alice change it meanwhile, and write on that read."""

    def alice_changes_it_meanwhile(_: Transcript) -> None:
        # Her own store in a thread of this process (a process of its own would import the
        # harness again, seconds of the suite): she shares nothing with Bob but the bucket.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(converse, url, alice, "alice_approves", {}).result(timeout=180)

    return [
        call("delete", path="shared.md", version=version),
        call("view", path="shared.md"),
        alice_changes_it_meanwhile,
        call("create", path="bob.md", content="based on the final plan\n"),
    ]


STEPS: dict[str, Callable[..., list[Step]]] = {
    "bob_reads": bob_reads,
    "alice_writes": alice_writes,
    "alice_approves": alice_approves,
    "bob_stale": bob_acts_on_stale_reads,
}
