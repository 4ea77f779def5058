"""Agents that keep file memory in a bucket-memory store, driven by a scripted offline model or a real one.

The scripted model is pydantic-ai's `FunctionModel`: each turn it asks a step function for the
next tool call (or None to finish), given every tool result so far, so a script can react to
what the memory tools answered, as a model would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from a13n_harness.builder import HarnessBuilder
from a13n_harness.capabilities.memory import FileMemoryCapability, FileMount, MemoryCursors
from a13n_harness.execution import ExecutableAgent
from a13n_harness.providers.memory import FileFormat, FileStore, Origin
from a13n_harness.spec import AgentSpec
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

MEMORY = "team"

type ToolCall = tuple[str, dict[str, Any]]


@dataclass
class Transcript:
    """What the scripted model has seen: the prompts of its first turn, and each tool's answer."""

    prompts: list[str] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)

    def memory_context(self) -> str:
        """The harness's memory-context blocks delivered with the run's first input."""
        return "\n".join(prompt for prompt in self.prompts if prompt.startswith("<memory-context"))


type Step = Callable[[Transcript], ToolCall | None]
type Script = Callable[[Transcript], ToolCall | None]

CONFLICTS = frozenset({"version_mismatch", "read_conflict", "conflict_retries_exhausted"})


def call(name: str, **arguments: Any) -> Step:
    """A step that always makes one tool call on the team memory."""
    return lambda _: (f"memory_file_{name}", {"memory": MEMORY, **arguments})


def error_of(answer: Any) -> str | None:
    """The error code of a tool's answer (the harness reports failures as JSON text), or None."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except json.JSONDecodeError:
            return None
    return answer.get("error") if isinstance(answer, dict) else None


def in_order(steps: Sequence[Step]) -> Script:
    """Each step once, in order; a step that returns None (a side effect) is passed over."""
    position = 0

    def script(transcript: Transcript) -> ToolCall | None:
        nonlocal position
        while position < len(steps):
            position += 1
            if (made := steps[position - 1](transcript)) is not None:
                return made
        return None

    return script


def persevering(steps: Sequence[Step], *, attempts: int = 4) -> Script:
    """Like a careful model: after a conflict, view the memory again and repeat the call that failed."""
    forward = in_order(steps)
    last: ToolCall | None = None
    tries, rereading = 0, False

    def script(transcript: Transcript) -> ToolCall | None:
        nonlocal last, tries, rereading
        if rereading:
            rereading = False
            return last
        if transcript.answers and error_of(transcript.answers[-1]) in CONFLICTS and tries < attempts:
            tries, rereading = tries + 1, True
            return call("view", path="")(transcript)
        tries, last = 0, forward(transcript)
        return last

    return script


def note_on_page(folder: str, note: str) -> Step:
    """After a view of `folder`: append the note to its last page, or start the next page once the
    last would pass half the file limit, so notes keep landing however many arrive."""
    page_bytes = FileFormat().max_file_bytes // 2
    line = f"- {note}\n"

    def step(seen: Transcript) -> ToolCall | None:
        listing = seen.answers[-1] if seen.answers else {}
        entries = listing.get("entries", []) if isinstance(listing, dict) else []
        pages = sorted((e["path"], int(e.get("size", 0))) for e in entries if str(e.get("path", "")).endswith(".md"))
        if pages and pages[-1][1] + len(line.encode()) <= page_bytes:
            return call("append", path=pages[-1][0], content=line)(seen)
        return call("create", path=f"{folder}/{len(pages) + 1:04d}.md", content=line)(seen)

    return step


NOT_FILED = "not filed"


def note_filer(folder: str, note: str, transcript: Transcript, *, attempts: int = 64) -> Model:
    """The scripted model of the deployment examples: view the folder, file the note on its last
    page, and when the write fails (another writer created the page first, or filled it) view
    again and decide again, as a real agent under contention must. Each round of racing writers
    has one winner, so `attempts` covers that many messages filed at once on one instance; past
    it the answer says the note was not filed (starting with `NOT_FILED`), never "done"."""
    file_note = note_on_page(folder, note)

    def script(seen: Transcript) -> ToolCall | None:
        turn = len(seen.answers)
        if turn % 2 == 0:  # before each attempt, and after each write
            return None if _wrote(seen) or turn >= 2 * attempts else call("view", path=folder)(seen)
        return file_note(seen)

    def final(seen: Transcript) -> str:
        return "done" if _wrote(seen) else f"{NOT_FILED}: {attempts} attempts lost to other writers"

    return scripted_model(script, transcript, final=final)


def _wrote(seen: Transcript) -> bool:
    """Whether the last tool call was a write that succeeded (every odd answer is a write's)."""
    return len(seen.answers) % 2 == 0 and len(seen.answers) > 0 and error_of(seen.answers[-1]) is None


def scripted_model(
    script: Script, transcript: Transcript, *, final: Callable[[Transcript], str] = lambda _: "done"
) -> Model:
    """A model that makes the script's tool calls, one per turn, then answers `final` (by default "done")."""

    async def turn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str) and not transcript.answers:
                    transcript.prompts.append(part.content)
                elif isinstance(part, (ToolReturnPart, RetryPromptPart)):
                    transcript.answers.append(part.content)
        if (made := script(transcript)) is not None:
            name, arguments = made
            call_id = f"call-{len(transcript.answers)}"
            yield {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}
        else:
            yield final(transcript)

    return FunctionModel(stream_function=turn)


def memory_agent(
    store: FileStore, model: Model | str, *, cursors: MemoryCursors | None = None, origin: Origin | None = None
) -> ExecutableAgent[str]:
    """An agent with one writable memory mounted as "team"; `model` is a model or a name such as openai:gpt-5-mini."""
    memory = FileMemoryCapability([FileMount(MEMORY, store, "write")], cursors=cursors, origin=origin)
    if isinstance(model, str):
        return HarnessBuilder().build(AgentSpec(model=model), output_type=str, capabilities=[memory])
    return HarnessBuilder().build(AgentSpec(), output_type=str, model=model, capabilities=[memory])


def main(argv: list[str] | None = None) -> None:
    """`python -m examples.agents [URL]`: one agent, driven by the scripted offline model, writes a
    note in a file memory (by default a new one in a temporary directory) and says what it did."""
    import argparse
    import asyncio
    import tempfile

    from bucket_memory import open_store

    parser = argparse.ArgumentParser(prog="python -m examples.agents", description=main.__doc__)
    parser.add_argument("url", nargs="?", help="a file memory's URL (default: a new one in a temporary directory)")
    given = parser.parse_args(argv).url

    async def run(url: str) -> None:
        transcript = Transcript()
        steps = [call("create", path="notes/ada.md", content="# ada\n- read the team index\n"), call("view", path="")]
        script, calls = persevering(steps), []

        def recorded(seen: Transcript) -> ToolCall | None:
            if (made := script(seen)) is not None:
                calls.append(f"{made[0]} {made[1].get('path')!r}")
            return made

        async with open_store(url) as store:
            model = scripted_model(recorded, transcript)
            agent = memory_agent(store, model, origin=Origin(run_id="example", principal_id="ada"))
            output = (await agent.run("Add a note about yourself, then look at the memory.")).output_or_raise()
            print(f"ada's run on {url} made {len(transcript.answers)} tool calls and answered {output!r}:")
            for made, answer in zip(calls, transcript.answers, strict=True):
                print(f"  {made}: {answer}")
            print("the memory now holds: " + ", ".join(entry.path for entry in await store.list()))

    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(run(given or f"{scratch}/team"))
        if not given:
            print("(the memory was in a temporary directory, now removed: give a URL to keep one)")


if __name__ == "__main__":
    main()
