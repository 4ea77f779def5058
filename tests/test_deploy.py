"""The deployment examples: the Lambda handler on moto, the Cloud Run service in-process on
fake-gcs-server through httpx's ASGI transport, and the Dockerfiles that package them."""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from a13n_harness.providers.memory import FileFormat, Origin

from .conftest import BUCKET, unique_prefix

ROOT = Path(__file__).parent.parent


@pytest.fixture
def lambda_function(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The handler module as a fresh Lambda instance holds it, for a memory of its own."""
    from examples import lambda_handler

    monkeypatch.setenv("MEMORY_URL", f"s3://{BUCKET}/{unique_prefix()}")
    monkeypatch.delenv("MODEL", raising=False)
    yield lambda_handler
    # What the Lambda runtime never does: close the warm client, so the next test starts cold.
    lambda_handler.loop.run_until_complete(lambda_handler.resources.aclose())
    lambda_handler.store = None


def test_the_lambda_agent_keeps_filing_past_the_file_limit(lambda_function: ModuleType) -> None:
    limit = FileFormat().max_file_bytes
    notes = [f"note {index}: " + "x" * 4000 for index in range(24)]  # 96 KB in all, past 64 KiB
    for note in notes:
        answer = lambda_function.handler({"note": note}, None)
        assert answer["answer"] == "done"
    assert answer["pages"] == ["inbox/0001.md", "inbox/0002.md", "inbox/0003.md"]
    store = lambda_function.store
    texts = [lambda_function.loop.run_until_complete(store.read(page)).text for page in answer["pages"]]
    assert all(len(text.encode()) <= limit // 2 for text in texts)
    assert "".join(texts) == "".join(f"- {note}\n" for note in notes), "every note, once, in order"
    assert lambda_function.store is store, "the warm store is kept between invocations"


def test_the_lambda_takes_function_url_requests_and_refuses_bad_events(lambda_function: ModuleType) -> None:
    answer = lambda_function.handler({"body": json.dumps({"note": "via the URL"}), "requestContext": {}}, None)
    assert answer["pages"] == ["inbox/0001.md"]
    deep = "[" * 100_000 + "]" * 100_000
    hostile: list[object] = [
        {},
        {"note": 7},
        {"note": "  "},
        {"body": "not json"},
        {"body": None},
        {"body": '["a"]'},
        None,
        5,
        "note",
        [{"note": "x"}],
        {"body": 5},
        {"body": {"note": "x"}},
        {"body": deep},
        {"body": json.dumps({"note": deep})[:-1]},
        {"body": "%%%", "isBase64Encoded": True},
        {"body": base64.b64encode(b"\xff\xfe").decode(), "isBase64Encoded": True},
    ]
    for event in hostile:
        refused = lambda_function.handler(event, None)
        assert refused["statusCode"] == 400 and "note" in json.loads(refused["body"])["error"], str(event)[:80]
    encoded = base64.b64encode(json.dumps({"note": "sent as base64"}).encode()).decode()
    answer = lambda_function.handler({"body": encoded, "isBase64Encoded": True, "requestContext": {}}, None)
    assert answer["answer"] == "done" and answer["pages"] == ["inbox/0001.md"]


def test_the_lambda_reads_the_model_key_from_ssm(lambda_function: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.session

    botocore.session.get_session().create_client("ssm").put_parameter(
        Name="/agents/model-key", Value="sk-from-ssm", Type="SecureString"
    )
    monkeypatch.setenv("MODEL_API_KEY_PARAMETER", "/agents/model-key")
    monkeypatch.setenv("MODEL_API_KEY_ENV", "BUCKET_MEMORY_TEST_MODEL_KEY")
    monkeypatch.setenv("BUCKET_MEMORY_TEST_MODEL_KEY", "")
    lambda_function.handler({"note": "first"}, None)
    assert os.environ["BUCKET_MEMORY_TEST_MODEL_KEY"] == "sk-from-ssm"


@pytest.fixture
async def service(gcs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The Cloud Run app with its lifespan run, and an httpx client calling it in-process."""
    prefix = unique_prefix()
    monkeypatch.setenv("MEMORY_URL", f"gs://{BUCKET}/{prefix}/team")
    monkeypatch.setenv("CONVERSATIONS_URL", f"gs://{BUCKET}/{prefix}/conversations")
    monkeypatch.delenv("MODEL", raising=False)
    cloud_run = importlib.import_module("examples.cloud_run")
    async with cloud_run.app.router.lifespan_context(cloud_run.app):
        # As a server does: an error the app answered with a 500 is not raised again in the client.
        transport = httpx.ASGITransport(app=cloud_run.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            yield client, cloud_run.app


async def test_the_service_answers_health_once_its_store_is_open(service: tuple[httpx.AsyncClient, Any]) -> None:
    client, app = service
    answer = await client.get("/healthz")
    assert answer.status_code == 200 and answer.json()["memory"] == app.state.memory.location


async def test_each_conversation_keeps_its_cursors(service: tuple[httpx.AsyncClient, Any]) -> None:
    client, app = service
    first = await client.post("/conversations/c-1/messages", json={"message": "ship on friday"})
    assert first.status_code == 200, first.text
    saved = json.loads((await app.state.conversations.read("c-1.json")).text)
    assert saved == first.json()["cursors"] and saved["team"], "the cursor the run moved is kept"
    # Another conversation writes meanwhile; c-1's next run starts from its own cursor.
    await app.state.memory.write("decisions.md", "use tea\n", expected=None, origin=Origin())
    second = await client.post("/conversations/c-1/messages", json={"message": "and test on thursday"})
    assert second.status_code == 200
    moved = json.loads((await app.state.conversations.read("c-1.json")).text)["team"]
    assert moved != saved["team"]
    other = await client.post("/conversations/c-2/messages", json={"message": "hello"})
    assert other.json()["cursors"]["team"] != saved["team"]
    notes = (await app.state.memory.read("notes/0001.md")).text
    assert notes == "- ship on friday\n- and test on thursday\n- hello\n"


async def test_racing_messages_of_one_conversation_both_land(service: tuple[httpx.AsyncClient, Any]) -> None:
    client, app = service
    answers = await asyncio.gather(
        *(client.post("/conversations/race/messages", json={"message": f"m{index}"}) for index in range(4))
    )
    assert [answer.status_code for answer in answers] == [200] * 4, [answer.text for answer in answers]
    notes = (await app.state.memory.read("notes/0001.md")).text
    assert sorted(notes.splitlines()) == [f"- m{index}" for index in range(4)]
    assert json.loads((await app.state.conversations.read("race.json")).text)["team"]


@pytest.mark.parametrize("messages", [6, pytest.param(24, marks=pytest.mark.slow)])
async def test_many_conversations_at_once_file_every_note(
    service: tuple[httpx.AsyncClient, Any], messages: int
) -> None:
    """Messages in as many conversations at once, as Cloud Run sends up to 80 to one instance: every
    200 is a filed note (of 24, 8 were filed and all 24 answered 200 "done")."""
    client, app = service
    answers = await asyncio.gather(
        *(client.post(f"/conversations/c{index}/messages", json={"message": f"m{index}"}) for index in range(messages))
    )
    filed = {f"- m{index}" for index, answer in enumerate(answers) if answer.status_code == 200}
    assert all(answer.status_code in (200, 503) for answer in answers), [answer.text for answer in answers]
    for answer in answers:
        if answer.status_code == 503:
            assert answer.json()["error"] == "not_filed"
    pages = [entry.path for entry in await app.state.memory.list() if entry.path.startswith("notes/")]
    lines = [line for page in pages for line in (await app.state.memory.read(page)).text.splitlines()]
    assert set(lines) == filed and len(lines) == len(filed), "a note is filed exactly when it is answered 200"
    assert len(filed) == messages


async def test_a_body_nested_past_the_parser_is_a_bad_request(service: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = service
    nested = '{"message": ' + "[" * 100_000 + "]" * 100_000 + "}"
    answer = await client.post(
        "/conversations/deep/messages", content=nested, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_message"
    bad = await client.post(
        "/conversations/deep/messages", content=b"\xff\xfe", headers={"content-type": "application/json"}
    )
    assert bad.status_code == 400


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/conversations/../etc/messages", {"message": "x"}, 404, None),
        ("/conversations/a%20b/messages", {"message": "x"}, 400, "invalid_conversation"),
        ("/conversations/" + "a" * 65 + "/messages", {"message": "x"}, 400, "invalid_conversation"),
        ("/conversations/ok/messages", {"text": "x"}, 400, "invalid_message"),
        ("/conversations/ok/messages", ["x"], 400, "invalid_message"),
        ("/conversations/ok/messages", {"message": ""}, 400, "invalid_message"),
    ],
)
async def test_bad_requests_get_a_message(
    service: tuple[httpx.AsyncClient, Any], path: str, body: Any, status: int, code: str | None
) -> None:
    client, _ = service
    answer = await client.post(path, json=body)
    assert answer.status_code == status
    if code is not None:
        assert answer.json()["error"] == code and answer.json()["message"]


async def test_a_damaged_conversation_and_a_failing_model_give_messages(
    service: tuple[httpx.AsyncClient, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, app = service
    await app.state.conversations.write("bad.json", '{"team": 5}', expected=None, origin=Origin())
    damaged = await client.post("/conversations/bad/messages", json={"message": "x"})
    assert damaged.status_code == 503 and "start a new conversation" in damaged.json()["message"]
    monkeypatch.setenv("MODEL", "no-such-provider:model")
    failed = await client.post("/conversations/fine/messages", json={"message": "x"})
    assert failed.status_code == 500 and failed.json()["error"] == "agent_failed"
    assert "Traceback" not in failed.text


@pytest.mark.parametrize(
    ("dockerfile", "base", "target"),
    [
        ("deploy/lambda/Dockerfile", "public.ecr.aws/lambda/python:3.13", "examples.lambda_handler.handler"),
        ("deploy/cloud-run/Dockerfile", "python:3.13-slim", "examples.cloud_run:app"),
    ],
)
def test_the_dockerfiles_copy_what_exists_and_start_what_imports(dockerfile: str, base: str, target: str) -> None:
    """No Docker engine runs here, so the image is not built: its parts are checked instead."""
    text = (ROOT / dockerfile).read_text()
    assert re.search(rf"^FROM {re.escape(base)}$", text, re.MULTILINE)
    for line in re.findall(r"^COPY (.+)$", text, re.MULTILINE):
        *sources, _ = line.split()
        for source in sources:
            assert (ROOT / source).exists(), f"{dockerfile} copies {source}, which does not exist"
    assert target in text
    module, _, attribute = target.replace(":", ".").rpartition(".")
    assert callable(getattr(importlib.import_module(module), attribute))
    extras = re.search(r'"/build\[([a-z0-9,]+)\]"', text)
    assert extras is not None
    assert set(extras.group(1).split(",")) <= set(_extras())


@pytest.mark.parametrize(
    ("dockerfile", "extras"), [("deploy/lambda", ["s3"]), ("deploy/cloud-run", ["gcs", "service"])]
)
def test_each_image_installs_its_lock_with_hashes_and_the_lock_covers_the_project(
    dockerfile: str, extras: list[str]
) -> None:
    """A rebuild installs the same packages: every requirement of the project and its extras is
    pinned (==) with hashes in the image's lock, and the image installs the lock before the project,
    whose own dependencies it then leaves alone."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    text = (ROOT / dockerfile / "Dockerfile").read_text()
    assert "--require-hashes -r /build/requirements.lock" in text and "--no-deps" in text
    lock = (ROOT / dockerfile / "requirements.lock").read_text()
    pinned = {
        canonicalize_name(name): version for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", lock, re.M)
    }
    assert "/opt/" not in lock and "--index-url" not in lock, "nothing of the machine that made it"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [
        entry for extra in extras for entry in project["optional-dependencies"][extra]
    ]
    for entry in wanted:
        requirement = Requirement(entry)
        if requirement.name == "bucket-memory":
            continue
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is not in {dockerfile}/requirements.lock"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (entry, pinned[name])
    assert lock.count("--hash=sha256:") >= len(pinned), "every pin carries its hashes"


def _extras() -> list[str]:
    import tomllib

    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
