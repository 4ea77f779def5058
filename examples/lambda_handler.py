"""An AWS Lambda handler: an agent that files notes in the memory at MEMORY_URL, warm across invocations.

The event is {"note": "..."} (or a function URL request whose JSON body is). Notes go to
`inbox/NNNN.md`, a new page once the last would pass half the file limit, so the agent keeps
working however many notes arrive. With MODEL set (such as openai:gpt-5-mini) a real model decides
how to file the note, its API key read once per cold start from the SSM SecureString parameter
MODEL_API_KEY_PARAMETER into the variable MODEL_API_KEY_ENV; without MODEL a scripted model files it.
A warm Lambda keeps its module state, so the loop, client and store are made once.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import os
from contextlib import AsyncExitStack
from typing import Any

from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogOptions, open_store
from examples.agents import NOT_FILED, Transcript, memory_agent, note_filer

INBOX = "inbox"

# aiobotocore clients belong to the loop that made them: every invocation runs on this one.
loop = asyncio.new_event_loop()
resources = AsyncExitStack()
store: LogFileStore | None = None


@atexit.register
def _close() -> None:
    """Close the warm store when the process ends (a script, or Lambda's shutdown), so its
    client's connections close cleanly instead of warning about an unclosed session."""
    if not loop.is_closed():
        loop.run_until_complete(resources.aclose())
        loop.close()


def handler(event: object, context: Any) -> dict[str, Any]:
    note = _note(event)
    if note is None:
        return {"statusCode": 400, "body": json.dumps({"error": 'send {"note": "..."}'})}
    return loop.run_until_complete(file_note(note, getattr(context, "aws_request_id", None)))


def _note(event: object) -> str | None:
    """The note of a direct invocation, or of a function URL request's JSON body (base64 when the
    URL says so). Any other event (null, a number, a body nested past the parser's depth) is None."""
    if isinstance(event, dict) and "body" in event:
        body = event["body"]
        if body is None:
            return None
        if not isinstance(body, str):
            return None
        if event.get("isBase64Encoded") is True:
            try:
                body = base64.b64decode(body, validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
                return None
        try:
            event = json.loads(body)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; deep nesting recurses
            return None
    note = event.get("note") if isinstance(event, dict) else None
    return note if isinstance(note, str) and note.strip() else None


async def file_note(note: str, request_id: str | None) -> dict[str, Any]:
    global store
    if store is None:
        await load_model_key()
        # Below the function's own timeout, so a slow store fails one operation with a message
        # instead of the whole invocation (Terraform sets it to a third of the function's timeout).
        options = LogOptions(operation_timeout=float(os.environ.get("MEMORY_OPERATION_TIMEOUT", "20")))
        store = await resources.enter_async_context(open_store(os.environ["MEMORY_URL"], options=options))
    model = os.environ.get("MODEL") or note_filer(INBOX, note, Transcript())
    agent = memory_agent(store, model, origin=Origin(run_id=request_id, principal_id="lambda"))
    result = await agent.run(f"File this note in the team memory, on the last page of {INBOX}/: {note}")
    answer = result.output_or_raise()
    if answer.startswith(NOT_FILED):  # the agent said so: never a success for a note not kept
        return {"statusCode": 503, "body": json.dumps({"error": "not_filed", "message": answer})}
    pages = [entry.path for entry in await store.list() if entry.path.startswith(f"{INBOX}/")]
    return {"answer": answer, "pages": pages}


async def load_model_key() -> None:
    """Put the model's API key, kept in SSM Parameter Store, where the model's SDK reads it."""
    parameter, variable = os.environ.get("MODEL_API_KEY_PARAMETER"), os.environ.get("MODEL_API_KEY_ENV")
    if not parameter or not variable or os.environ.get(variable):
        return
    from aiobotocore.session import get_session

    async with get_session().create_client("ssm") as ssm:
        answer = await ssm.get_parameter(Name=parameter, WithDecryption=True)
    os.environ[variable] = answer["Parameter"]["Value"]
