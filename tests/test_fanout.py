"""`verify --all`, `stats --all`, `compact --all`: every memory under a prefix in one process, a few at a time, each
reported on its own (one that cannot be read among them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
from a13n_harness.providers.memory import Origin

from bucket_memory import MemoryAdmin, open_store
from bucket_memory.cli import app
from bucket_memory.fanout import each_memory

from .conftest import VERSIONED, unique_prefix
from .helpers import CliRunner, cli

ORIGIN = Origin(run_id="fanout-test")
SCHEMAS = Path(__file__).parent.parent / "docs" / "cli" / "schemas"


async def _write(url: str, files: int) -> None:
    async with open_store(url) as store:
        for n in range(files):
            await store.write(f"n{n}.md", f"note {n}\n", expected=None, origin=ORIGIN)


async def test_every_memory_once_at_most_concurrency_at_a_time(tmp_path: Path) -> None:
    users = tmp_path / "users"
    for n in range(5):
        await _write(str(users / f"u{n}"), n + 1)
    in_flight, most, seen = 0, 0, []

    async def work(admin: MemoryAdmin) -> int:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        for _ in range(3):  # yield, so that a store opened beside it could start its work
            await asyncio.sleep(0)
        stats = await admin.stats()
        in_flight -= 1
        return stats.files

    outcomes = await each_memory(users, work, concurrency=2, progress=lambda done, total: seen.append((done, total)))

    assert [(Path(outcome.url).name, outcome.result) for outcome in outcomes] == [(f"u{n}", n + 1) for n in range(5)]
    assert most == 2
    assert seen[0] == (0, 5) and seen[-1] == (5, 5) and len(seen) == 6


def _json(*arguments: str, expect: int) -> object:
    result = CliRunner().invoke(app, [*arguments, "--json"])
    assert result.exit_code == expect, result.output
    value = json.loads(result.stdout)
    jsonschema.validate(value, json.loads((SCHEMAS / f"{arguments[0]}.json").read_text()))
    return value


def boto3_client() -> Any:
    import botocore.session

    return botocore.session.get_session().create_client("s3")


def test_verify_and_stats_all_on_s3_report_each_memory(s3_endpoint: str) -> None:
    root = f"s3://{VERSIONED}/{unique_prefix()}/users"
    for name, files in (("a", 1), ("b", 2), ("c", 3)):
        asyncio.run(_write(f"{root}/{name}", files))
    cli("destroy", f"{root}/b", "--yes")

    damaged = f"{root}/c".removeprefix(f"s3://{VERSIONED}/") + "/log/00000000000000000002.json"
    boto3_client().put_object(Bucket=VERSIONED, Key=damaged, Body=b'{"not": "a commit"}')

    verdicts = _json("verify", root, "--all", expect=1)
    assert isinstance(verdicts, list)
    by_url = {verdict["url"].rsplit("/", 1)[1]: verdict for verdict in verdicts}
    assert (by_url["a"]["ok"], by_url["a"]["destroyed"]) == (True, False)
    assert (by_url["b"]["ok"], by_url["b"]["destroyed"], by_url["b"]["error"]["code"]) == (True, True, "memory_deleted")
    assert not by_url["c"]["ok"] and by_url["c"]["problems"]

    found = _json("stats", root, "--all", expect=0)
    assert isinstance(found, list)
    counted = {memory["url"].rsplit("/", 1)[1]: memory["stats"] and memory["stats"]["files"] for memory in found}
    assert counted["a"] == 1 and counted["b"] is None
    compacted = _json("compact", root, "--all", expect=1)  # c's damaged log stops its compaction
    assert isinstance(compacted, list)
    by_url = {memory["url"].rsplit("/", 1)[1]: memory for memory in compacted}
    assert by_url["a"]["compacted"] == {"floor": 0, "log_deleted": 0, "checkpoints_deleted": 0}
    assert (by_url["b"]["destroyed"], by_url["c"]["destroyed"]) == (True, False) and by_url["c"]["error"]
    said = cli("verify", root, "--all", expect=1)
    assert f"{root}/a: ok" in said and f"{root}/b: destroyed" in said and "1 of 2 memories whole, 1 destroyed" in said
