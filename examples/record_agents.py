"""Agents with record memory in a bucket: one remembers a fact, another recalls it in its next run.

Each function is one agent's run in its own process (the memory is all they share), driven by
the scripted offline model of `examples.agents`: `remember` makes the model call
`memory_record_add`; `recall` only asks a question, and the harness recalls the records closest
to it before the model's first turn.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from a13n_harness.builder import HarnessBuilder
from a13n_harness.capabilities.memory import RecordMemoryCapability, RecordMount
from a13n_harness.execution import ExecutableAgent
from a13n_harness.providers.memory import Origin, RecordStore
from a13n_harness.spec import AgentSpec
from pydantic_ai.models import Model

if not __package__:  # `python examples/record_agents.py` puts examples/ on the path: the checkout, as `python -m` would
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bucket_memory import open_record_store
from examples.agents import Transcript, in_order, scripted_model

FACTS = "facts"


def record_agent(store: RecordStore, model: Model) -> ExecutableAgent[str]:
    """An agent with one writable record memory mounted as "facts", recalled at each run's first input."""
    memory = RecordMemoryCapability([RecordMount(FACTS, store, "write")])
    return HarnessBuilder().build(AgentSpec(), output_type=str, model=model, capabilities=[memory])


def remember(url: str, fact: str, agent: str) -> list[Any]:
    """One run in which the model adds `fact` to the record memory at `url`; the tools' answers."""
    return asyncio.run(_remember(url, fact, agent))


async def _remember(url: str, fact: str, agent: str) -> list[Any]:
    transcript = Transcript()
    steps = [lambda _: ("memory_record_add", {"memory": FACTS, "text": fact})]
    async with open_record_store(url, origin=Origin(principal_id=agent)) as store:
        result = await record_agent(store, scripted_model(in_order(steps), transcript)).run("Remember this.")
    result.output_or_raise()
    return transcript.answers


def recall(url: str, question: str) -> list[str]:
    """One run that only asks `question`: the recall blocks the harness gave the model first."""
    return asyncio.run(_recall(url, question))


async def _recall(url: str, question: str) -> list[str]:
    transcript = Transcript()
    async with open_record_store(url) as store:
        result = await record_agent(store, scripted_model(in_order([]), transcript)).run(question)
    result.output_or_raise()
    return [prompt for prompt in transcript.prompts if prompt.startswith("<memory-recall")]


def main(argv: list[str] | None = None) -> None:
    """`python -m examples.record_agents [URL]`: one run remembers a fact in a record memory (by
    default a new one in a temporary directory), another recalls it; each says what it did."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m examples.record_agents", description=main.__doc__)
    parser.add_argument("url", nargs="?", help="a record memory's URL (default: a new one in a temporary directory)")
    given = parser.parse_args(argv).url
    with tempfile.TemporaryDirectory() as scratch:
        url = given or f"{scratch}/facts"
        fact, question = "The team drinks green tea at standup.", "Which tea should I bring to standup tomorrow?"
        answers = remember(url, fact, "ada")
        print(f"ada's run called memory_record_add on {url}: {fact!r} (the tool answered {answers[0]!r})")
        blocks = recall(url, question)
        print(f"grace's run asked only {question!r}; the harness recalled before the model's first turn:")
        print(blocks[0] if blocks else "(nothing: the record memory lost the fact)")
        if not given:
            print("(the memory was in a temporary directory, now removed: give a URL to keep one)")


if __name__ == "__main__":
    main()
