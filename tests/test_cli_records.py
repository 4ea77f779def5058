"""`bucket-memory records` for operators: an embedder named as pydantic-ai names it (through the
real OpenAI client, against an embeddings endpoint on loopback), whole ids in the listings
whatever the terminal's width, ids given by a unique prefix, and a missing extra or a provider's
refusal as a message that says what to do."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.cli import EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE, app
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.records.record_format import Embedding, RecordBody, packed
from bucket_memory.testing.embeddings import HashingEmbeddingModel

from .helpers import CliRunner, cli

MODEL = "text-embedding-3-small"


class Endpoint:
    """An OpenAI-compatible embeddings endpoint: vectors of the offline model, or a refusal."""

    def __init__(self) -> None:
        self.refusing = False
        self.requests: list[list[str]] = []
        model = HashingEmbeddingModel(dimensions=32)
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(asked["input"])
                if endpoint.refusing:
                    body = {
                        "error": {"message": "<b>quota</b> exceeded", "type": "insufficient_quota", "code": "quota"}
                    }
                    self._answer(400, body)
                    return
                data = [
                    {"object": "embedding", "index": n, "embedding": model._vector(text)}
                    for n, text in enumerate(asked["input"])
                ]
                usage = {"prompt_tokens": 1, "total_tokens": 1}
                self._answer(200, {"object": "list", "data": data, "model": MODEL, "usage": usage})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                encoded = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    served = Endpoint()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", served.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield served
    served.server.shutdown()
    served.server.server_close()
    thread.join()


def run(*arguments: str, expect: int = 0, columns: int = 400) -> str:
    result = CliRunner().invoke(app, list(arguments), env={"COLUMNS": str(columns)})
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result.output


def test_an_embedder_named_on_the_command_line_stores_and_ranks_by_vectors(endpoint: Endpoint, tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    embedder = ("--embedder", f"openai:{MODEL}")
    tea = json.loads(run("records", "add", url, "The team drinks green tea at standup.", *embedder, "--json"))
    run("records", "add", url, "Deploys happen on Tuesdays.", *embedder)
    stored = [json.loads(line) for line in _files(url).values()]
    assert {body["embedding"]["model"] for body in stored} == {f"openai:{MODEL}"}
    for ranking in ("hybrid", "vectors"):
        found = json.loads(run("records", "search", url, "green tea", *embedder, "--ranking", ranking, "--json"))
        assert found[0]["id"] == tea["id"]
    assert endpoint.requests[-1] == ["green tea"]  # the stored vectors were used: only the query was embedded


def test_a_providers_refusal_is_a_message_with_its_words(endpoint: Endpoint, tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    run("records", "add", url, "The team drinks green tea at standup.")  # no vector: embedded at a search
    endpoint.refusing = True
    searching = ("records", "search", url, "tea", "--embedder", f"openai:{MODEL}")
    printed = run(*searching, "--ranking", "vectors", expect=EXIT_STORE)
    assert "error (unavailable)" in printed and "<b>quota</b> exceeded" in printed and f"openai:{MODEL}" in printed
    printed = run(*searching)  # hybrid answers by words, and says why
    assert "The team drinks" in printed and "ranked by words alone" in printed and "<b>quota</b> exceeded" in printed
    printed = run("records", "add", url, "another", "--embedder", f"openai:{MODEL}", expect=EXIT_STORE)
    assert "400" in printed and len(json.loads(run("records", "ls", url, "--json"))) == 1


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("nope", "provider prefix"),
        ("unknownprovider:model", "Unknown provider"),
        ("cohere:embed-v4.0", "CO_API_KEY"),
        ("<b>x</b>:y" * 50, "cannot be used here"),
        ("json:dumps", "missing 1 required positional argument"),
        ("bucket_memory.testing.embeddings:nothing_here", "has no 'nothing_here'"),
        ("bucket_memory.records.record_format:SUFFIX", "not an Embedder or an EmbeddingModel"),
    ],
)
def test_an_embedder_this_installation_cannot_use_is_a_usage_error(
    name: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CO_API_KEY", raising=False)
    url = str(tmp_path / "facts")
    run("records", "add", url, "a fact")
    for command in (("search", url, "fact"), ("add", url, "another fact")):
        printed = run("records", *command, "--embedder", name, expect=EXIT_USAGE)
        assert says in printed and "--embedder" in printed
    assert "needs --embedder" in run("records", "search", url, "fact", "--ranking", "vectors", expect=EXIT_USAGE)
    assert "hybrid" in run("records", "search", url, "fact", "--ranking", "<b>best</b>", expect=EXIT_USAGE)


def test_listings_show_whole_ids_on_a_narrow_terminal(tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    ids = [json.loads(run("records", "add", url, f"fact number {n} " + "word " * 30, "--json"))["id"] for n in range(3)]
    for command in (("ls", url), ("search", url, "fact")):
        printed = run("records", *command, columns=60)
        assert all(record_id in printed for record_id in ids), printed


def test_an_id_is_taken_by_a_unique_prefix_as_git_takes_a_commits(tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    ids = ["abcd" + "0" * 27 + "1", "abcd" + "0" * 27 + "2", "1234" + "f" * 28]
    _seed(url, {record_id: f"fact {record_id}" for record_id in ids})
    printed = run("records", "rm", url, "abcd", expect=EXIT_STORE)  # two records start so
    assert "record_not_found" in printed and ids[0] in printed and ids[1] in printed and "give more" in printed
    assert json.loads(run("records", "rm", url, "1234F", "--json")) == {"id": ids[2]}  # any case
    assert json.loads(run("records", "rm", url, ids[0][:-1] + "1", "--json")) == {"id": ids[0]}
    assert "record_not_found" in run("records", "rm", url, "9999", expect=EXIT_STORE)  # an id no record has
    for given in ("ab", "abc", "xyz0", "abcd-", "<b>abcd</b>", "a" * 33):  # what no id can be: the command line's
        assert "is not a record id" in run("records", "rm", url, given, expect=EXIT_USAGE)
        assert "is not a record id" in run("records", "erase", url, given, "--yes", expect=EXIT_USAGE)
    assert [record["id"] for record in json.loads(run("records", "ls", url, "--json"))] == [ids[1]]


def test_a_missing_records_extra_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "facts")
    cli("records", "add", url, "a fact")
    monkeypatch.setitem(sys.modules, "numpy", None)  # import then raises ModuleNotFoundError
    for command in (("search", url, "fact"), ("ls", url)):
        printed = run("records", *command, expect=EXIT_STORE)
        assert 'pip install -e ".[records]"' in printed and "unexpected" not in printed  # one that runs


def _seed(url: str, texts: dict[str, str]) -> None:

    _put(url, {f"{key}.json": RecordBody(text, time_text(1.7e9)).encode() for key, text in texts.items()})


def _files(url: str) -> dict[str, str]:
    import asyncio

    state = asyncio.run(LogFileStore(LocalObjectStore(url)).state())
    return {path: live.text for path, live in state.files.items()}


def test_an_embedder_of_ones_own_is_named_module_attribute(tmp_path: Path) -> None:
    """Issue 45: `--embedder module:attr` (a class here; an Embedder or a factory works alike)."""
    url, own = str(tmp_path / "facts"), "bucket_memory.testing.embeddings:HashingEmbeddingModel"
    run("records", "add", url, "The team drinks green tea at standup.", "--embedder", own)
    assert {json.loads(text)["embedding"]["model"] for text in _files(url).values()} == {"test:hashing-v1"}
    found = json.loads(run("records", "search", url, "green tea", "--embedder", own, "--json"))
    assert found[0]["text"].startswith("The team drinks")


def test_records_doctor_names_the_texts_a_model_refused(tmp_path: Path) -> None:
    """Issue 42: a refused text is named once, by `records doctor` (exit 1), not met on every search."""
    url, model = str(tmp_path / "facts"), "<b>openai</b>:small\x1b[31m"
    vector = packed_vector([1.0, 0.0])
    ids = ["a" * 32, "b" * 32, "c" * 32]
    at = time_text(1.7e9)
    bodies = {
        f"{ids[0]}.json": RecordBody("tea", at, (Embedding(model, vector), Embedding("test:other", vector))).encode(),
        f"{ids[1]}.json": RecordBody("coffee " * 500, at, (Embedding(model, ""),)).encode(),
        f"{ids[2]}.json": RecordBody("water", at).encode(),
    }
    _put(url, bodies)
    printed = run("records", "doctor", url, expect=EXIT_PROBLEMS)
    assert "3 records; 1 with no vector" in printed and f"refused {ids[1]}" in printed and "Shorten or split" in printed
    found = json.loads(run("records", "doctor", url, "--json", expect=EXIT_PROBLEMS))
    assert found == {
        "records": 3,
        "without": 1,
        "models": [
            {"model": model, "dimensions": None, "vectors": 0, "refused": [ids[1]], "reasons": [""]},
            {"model": model, "dimensions": 2, "vectors": 1, "refused": [], "reasons": []},
            {"model": "test:other", "dimensions": 2, "vectors": 1, "refused": [], "reasons": []},
        ],
    }
    run("records", "rm", url, ids[1])
    assert "0 refused" in run("records", "doctor", url)


def test_a_search_that_finds_nothing_exits_1_as_grep_does(tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    run("records", "add", url, "The team drinks green tea at standup.")
    assert json.loads(run("records", "search", url, "volcano", "--json", expect=EXIT_PROBLEMS)) == []
    said = run("records", "search", url, "volcano", expect=EXIT_PROBLEMS)  # words, not an empty table
    assert said == "no record matches 'volcano'\n", said
    assert json.loads(run("records", "search", url, "tea", "--json"))[0]["text"].startswith("The team")


def packed_vector(values: list[float]) -> str:
    import numpy

    return packed(numpy.asarray(values, dtype=numpy.float32))


def _put(url: str, bodies: dict[str, str]) -> None:
    import asyncio

    admin = MemoryAdmin(LogFileStore(LocalObjectStore(url)))
    asyncio.run(admin.put_files(bodies, replace=False, origin=Origin(run_id="seed")))
