"""An AWS Lambda handler: an agent that files notes in the memory at MEMORY_URL, warm across invocations.

The event is {"note": "..."}. With MODEL set (such as openai:gpt-5-mini, plus its API key) a real
model decides how to file the note; without it a scripted model appends it to inbox.md. A warm
Lambda keeps its module state, so the loop, client and store are made once: the store's cached
state then makes a fresh read one GET and an uncontended write one PUT.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from typing import Any

from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, open_store
from examples.agents import Transcript, call, memory_agent, persevering, scripted_model

# aiobotocore clients belong to the loop that made them: every invocation runs on this one.
loop = asyncio.new_event_loop()
resources = AsyncExitStack()
store: LogFileStore | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return loop.run_until_complete(file_note(str(event["note"]), getattr(context, "aws_request_id", None)))


async def file_note(note: str, request_id: str | None) -> dict[str, Any]:
    global store
    if store is None:
        store = await resources.enter_async_context(open_store(os.environ["MEMORY_URL"]))
    transcript = Transcript()

    def append_or_create(seen: Transcript) -> tuple[str, dict[str, Any]] | None:
        listing = seen.answers[-1] if seen.answers else {}
        exists = isinstance(listing, dict) and any(e.get("path") == "inbox.md" for e in listing.get("entries", []))
        action = "append" if exists else "create"
        return call(action, path="inbox.md", **{"content": f"- {note}\n"})(seen)

    model = os.environ.get("MODEL") or scripted_model(
        persevering([call("view", path=""), append_or_create]), transcript
    )
    agent = memory_agent(store, model, origin=Origin(run_id=request_id, principal_id="lambda"))
    result = await agent.run(f"File this note in the team memory's inbox.md: {note}")
    return {"answer": result.output_or_raise(), "inbox": (await store.read("inbox.md")).text}
