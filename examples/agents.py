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
from a13n_harness.providers.memory import FileStore, Origin
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


def call(name: str, **arguments: Any) -> Step:
    """A step that always makes one tool call on the team memory."""
    return lambda _: (f"memory_file_{name}", {"memory": MEMORY, **arguments})


def scripted_model(steps: Sequence[Step], transcript: Transcript) -> Model:
    """A model that makes the steps' tool calls in turn, then answers "done"."""
    position = 0

    async def turn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        nonlocal position
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str) and not transcript.answers:
                    transcript.prompts.append(part.content)
                elif isinstance(part, (ToolReturnPart, RetryPromptPart)):
                    transcript.answers.append(part.content)
        while position < len(steps):
            step = steps[position](transcript)
            position += 1
            if step is not None:
                name, arguments = step
                yield {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=f"call-{position}")}
                return
        yield "done"

    return FunctionModel(stream_function=turn)


def memory_agent(
    store: FileStore, model: Model, *, cursors: MemoryCursors | None = None, origin: Origin | None = None
) -> ExecutableAgent[str]:
    """An agent with one writable memory mounted as "team"."""
    memory = FileMemoryCapability([FileMount(MEMORY, store, "write")], cursors=cursors, origin=origin)
    return HarnessBuilder().build(AgentSpec(), output_type=str, model=model, capabilities=[memory])
