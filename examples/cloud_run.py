"""A Cloud Run service: an agent with the team memory at MEMORY_URL mounted, one conversation per URL.

`POST /conversations/{id}/messages` with {"message": "..."} runs the agent; `GET /healthz` answers
once the store is open. The store is opened once, in the app's lifespan, and shared by every
request. Each conversation's `MemoryCursors` are kept in the file memory at CONVERSATIONS_URL (one
`<id>.json` file, written with a compare-and-swap), so the next message of a conversation, on any
instance, gets only what changed in the team memory since, not the whole memory again. With MODEL
set (such as openai:gpt-5-mini, its key from Secret Manager in the environment) a real model
answers; without it a scripted model files the message as a note. Run it with
`uvicorn examples.cloud_run:app --host 0.0.0.0 --port $PORT`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from a13n_harness.capabilities.memory import MemoryCursors
from a13n_harness.providers.memory import FileStore, MemoryStoreError, Origin
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bucket_memory import open_store
from examples.agents import NOT_FILED, Transcript, memory_agent, note_filer

NOTES = "notes"
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What each store error means for the caller, as an HTTP status.
STATUS_OF = {"version_mismatch": 409, "not_found": 404, "forbidden": 502, "unavailable": 503, "too_large": 413}


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with AsyncExitStack() as stores:
        app.state.memory = await stores.enter_async_context(open_store(os.environ["MEMORY_URL"]))
        app.state.conversations = await stores.enter_async_context(open_store(os.environ["CONVERSATIONS_URL"]))
        yield


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "memory": request.app.state.memory.location})


async def message(request: Request) -> JSONResponse:
    conversation = request.path_params["conversation"]
    if not CONVERSATION_ID.fullmatch(conversation):
        return _refusal(400, "invalid_conversation", "A conversation ID is 1 to 64 letters, digits, _ or -.")
    try:
        body = await request.json()
    except (ValueError, RecursionError):  # not JSON (JSONDecodeError, bad UTF-8), or nested past the parser
        body = None
    text = body.get("message") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        return _refusal(400, "invalid_message", 'Send a JSON body such as {"message": "..."}.')
    try:
        answered = await converse(request.app.state.memory, request.app.state.conversations, conversation, text)
    except MemoryStoreError as error:
        return _refusal(STATUS_OF.get(error.code, 500), error.code, str(error))
    if answered["answer"].startswith(NOT_FILED):  # the agent said so: never a 200 for a note not kept
        return _refusal(503, "not_filed", f"{answered['answer']}; send the message again.")
    return JSONResponse(answered)


async def converse(memory: FileStore, conversations: FileStore, conversation: str, text: str) -> dict[str, Any]:
    """Run the agent on one message with the conversation's cursors, then keep the cursors it moved."""
    path = f"{conversation}.json"
    try:
        saved = await conversations.read(path)
        positions, expected = _positions(saved.text), saved.version
    except MemoryStoreError as error:
        if error.code != "not_found":
            raise
        positions, expected = {}, None
    cursors = MemoryCursors(positions)
    model = os.environ.get("MODEL") or note_filer(NOTES, text, Transcript())
    agent = memory_agent(memory, model, cursors=cursors, origin=Origin(run_id=conversation, principal_id="cloud-run"))
    answer = (await agent.run(text)).output_or_raise()
    await _keep(conversations, path, json.dumps(cursors.snapshot()), expected)
    return {"conversation": conversation, "answer": answer, "cursors": cursors.snapshot()}


async def _keep(conversations: FileStore, path: str, text: str, expected: str | None) -> None:
    """Save the cursors over whatever a racing message of the same conversation saved.

    The agent's writes have landed, so this must not fail the request. Either order is safe: a
    cursor older than the other's only makes the next message see some changes twice.
    """
    for _ in range(3):
        try:
            await conversations.write(path, text, expected=expected, origin=Origin())
            return
        except MemoryStoreError as error:
            if error.code != "version_mismatch":
                raise
            expected = (await conversations.read(path)).version
    await conversations.write(path, text, expected=expected, origin=Origin())


def _positions(text: str) -> dict[str, str | None]:
    """A conversation file's cursors; anything else in it is refused, never half-used."""
    try:
        positions = json.loads(text)
    except json.JSONDecodeError:
        positions = None
    if not isinstance(positions, dict) or not all(
        isinstance(key, str) and (value is None or isinstance(value, str)) for key, value in positions.items()
    ):
        raise MemoryStoreError("unavailable", "This conversation's saved state is damaged: start a new conversation.")
    return positions


def _refusal(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


async def _failure(request: Request, error: Exception) -> JSONResponse:
    """Whatever else failed (the model, most often): a message, never a traceback."""
    return _refusal(500, "agent_failed", f"The agent could not answer ({type(error).__name__}); try again.")


app = Starlette(
    routes=[Route("/healthz", health), Route("/conversations/{conversation}/messages", message, methods=["POST"])],
    lifespan=lifespan,
    exception_handlers={Exception: _failure},
)
