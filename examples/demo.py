"""`make demo`: several agents in separate processes share one memory in an S3 bucket, with no lock server,
and a record one agent remembers is recalled in another's run.

With no arguments it starts a local S3 (a moto server) and drives each agent with a scripted
offline model, or with openai:gpt-5-mini when OPENAI_API_KEY is set (`--model` picks any model,
`--model scripted` stays offline). `python -m examples.demo s3://bucket/prefix` uses a real bucket
with the standard AWS credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import (
    Changes,
    FileEntry,
    FileText,
    FullResync,
    GrepMatch,
    MemoryStoreError,
    Origin,
)
from pydantic_ai.models import Model
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if not __package__:  # `python examples/demo.py` puts examples/ on the path: the checkout, as `python -m` would
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bucket_memory import LogFileStore, MemoryAdmin, open_store
from bucket_memory.runtime.installing import install_hint
from bucket_memory.testing.emulators import moto_server
from examples.agents import MEMORY, Step, Transcript, call, memory_agent, persevering, scripted_model
from examples.record_agents import recall, remember

AGENTS = ("ada", "grace", "linus", "barbara")
console = Console()


class ConflictRecorder:
    """A FileStore that passes everything to `store` and notes each lost compare-and-swap the harness retries."""

    def __init__(self, store: LogFileStore, conflicts: list[str]) -> None:
        self.store = store
        self.conflicts = conflicts

    async def list(self) -> list[FileEntry]:
        return await self.store.list()

    async def read(self, path: str) -> FileText:
        return await self.store.read(path)

    async def write(
        self,
        path: str,
        text: str,
        *,
        expected: str | None,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        try:
            return await self.store.write(path, text, expected=expected, origin=origin, dependencies=dependencies)
        except MemoryStoreError as error:
            self._note(error, path, expected)
            raise

    async def move(
        self,
        source: str,
        destination: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        try:
            return await self.store.move(
                source, destination, expected=expected, origin=origin, dependencies=dependencies
            )
        except MemoryStoreError as error:
            self._note(error, source, expected)
            raise

    async def delete(
        self, path: str, *, expected: str, origin: Origin, dependencies: Mapping[str, str | None] | None = None
    ) -> None:
        try:
            await self.store.delete(path, expected=expected, origin=origin, dependencies=dependencies)
        except MemoryStoreError as error:
            self._note(error, path, expected)
            raise

    async def changes(self, since: str | None) -> Changes | FullResync:
        return await self.store.changes(since)

    async def purge(self) -> None:
        await self.store.purge()

    async def search(
        self, pattern: str, *, regex: bool, case_sensitive: bool, path: str, limit: int
    ) -> tuple[builtins.list[GrepMatch], bool]:
        return await self.store.search(pattern, regex=regex, case_sensitive=case_sensitive, path=path, limit=limit)

    def _note(self, error: MemoryStoreError, path: str, expected: str | None) -> None:
        if error.code == "version_mismatch":
            now = error.current.version if error.current is not None else "absent"
            self.conflicts.append(f"writing {path} at version {expected} lost: it is at {now}; the harness re-read it")
        elif error.code == "read_conflict" and error.current is not None:
            self.conflicts.append(
                f"writing {path} refused: {error.current.path}, which it had read, is now at version "
                f"{error.current.version}; the agent viewed the memory again and retried"
            )


def agent_script(name: str) -> list[Step]:
    """View the memory, write an own note, append to the shared log, edit the shared index, file the note."""
    return [
        call("view", path=""),
        call("create", path=f"notes/{name}.md", content=f"# {name}\n- read the team index\n"),
        call("append", path="log.md", content=f"{name} checked in\n"),
        call(
            "edit", path="index.md", old_string="<!-- next -->", new_string=f"- [{name}](done/{name}.md)\n<!-- next -->"
        ),
        call("move", source=f"notes/{name}.md", destination=f"done/{name}.md"),
    ]


@dataclass
class AgentReport:
    name: str
    output: str
    tool_calls: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    conflicts: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run_agent(url: str, name: str, model_name: str | None, barrier: Any) -> AgentReport:
    """One agent process: open the memory, wait for the others, run one conversation turn."""
    return asyncio.run(_run_agent(url, name, model_name, barrier))


async def _run_agent(url: str, name: str, model_name: str | None, barrier: Any) -> AgentReport:
    report = AgentReport(name, "")
    async with open_store(url) as store:
        await _count_requests(store, report.requests)
        transcript = Transcript()
        model: Model | str = (
            scripted_model(persevering(agent_script(name)), transcript) if model_name is None else model_name
        )
        agent = memory_agent(
            ConflictRecorder(store, report.conflicts), model, origin=Origin(run_id=f"demo-{name}", principal_id=name)
        )
        barrier.wait()
        started = time.perf_counter()
        result = await agent.run(
            f"You are {name}. In the {MEMORY} memory: add a short note notes/{name}.md about yourself, append "
            f"'{name} checked in' to log.md, add yourself to the list in index.md, then move your note to done/."
        )
        report.seconds = time.perf_counter() - started
        report.output = str(result.output_or_raise())
        report.tool_calls = len(transcript.answers)
    return report


async def _count_requests(store: LogFileStore, counts: Counter[str]) -> None:
    """Count S3 requests by operation (other backends are not counted)."""
    objects = store.objects
    if type(objects).__name__ == "S3ObjectStore":
        client = await objects.client()  # type: ignore[attr-defined]
        client.meta.events.register("before-call.s3", lambda model, **_: counts.update([model.name]))


async def seed(url: str) -> None:
    async with open_store(url) as store:
        for path, text in {
            "index.md": "---\ndescription: Who is on the team\n---\n# Team\n<!-- next -->\n",
            "log.md": "# Check-ins\n",
        }.items():
            try:
                await store.write(path, text, expected=None, origin=Origin(run_id="demo-setup", principal_id="setup"))
            except MemoryStoreError as error:
                if error.code != "version_mismatch":
                    raise


# The command as a reader in the checkout types it: .venv/bin/bucket-memory, which no PATH needs to hold.
COMMAND = os.path.relpath(Path(sys.executable).with_name("bucket-memory"))


async def show(url: str, reports: list[AgentReport]) -> list[str]:
    """The memory, its history and a restore; the arguments of the command that undoes the restore."""
    async with open_store(url) as store:
        listing = Table("path", "version", "bytes", "description", title="The shared memory now", box=None)
        for entry in await store.list():
            listing.add_row(entry.path, entry.version, str(entry.size), entry.description or "")
        console.print(listing)
        console.print(Panel(Text((await store.read("index.md")).text.strip()), title="index.md, edited by every agent"))

        history = Table("version", "who", "what", title="History (newest first)", box=None)
        for revision in (await MemoryAdmin(store).revisions())[:12]:
            what = f"{revision.action} {revision.path}" + (f" ({revision.other})" if revision.other else "")
            history.add_row(revision.version, revision.origin.principal_id or "", what)
        console.print(history)

        conflicts = [(report.name, conflict) for report in reports for conflict in report.conflicts]
        if conflicts:
            lines = "\n".join(f"{name}: {conflict}" for name, conflict in conflicts)
        else:
            lines = "no agent lost a race this time (run again: the agents race for real)"
        console.print(Panel(Text(lines), title="Conflicts caught: compare-and-swap on a shared log, no lock server"))

        first_index = (await MemoryAdmin(store).revisions("index.md"))[-1].version
        restored = await MemoryAdmin(store).restore(
            "index.md", first_index, origin=Origin(run_id="demo", principal_id="operator")
        )
        undo = ["restore", url, "index.md", "--version", str(int(restored or 0) - 1)]
        text = (
            f"index.md restored to version {first_index} as a new commit, version {restored}:\n"
            f"{(await store.read('index.md')).text.strip()}\n\n"
            f"Undo it with: {COMMAND} {' '.join(undo)} (run below)"
        )
        console.print(Panel(Text(text), title="Restore"))

    requests = Table("agent", "tool calls", "PutObject", "GetObject", "ListObjectsV2", "seconds", title="S3 requests")
    for report in reports:
        requests.add_row(
            report.name,
            str(report.tool_calls),
            str(report.requests["PutObject"]),
            str(report.requests["GetObject"]),
            str(report.requests["ListObjectsV2"]),
            f"{report.seconds:.2f}",
        )
    console.print(requests)
    console.print(
        "An uncontended write is one PutObject (If-None-Match: *) and a fresh read one GetObject; a lost race "
        "adds a read of the winner's commit, and the tool layer reads each file before it writes it."
    )
    return undo


def show_cli(url: str, undo: list[str], *, local: bool) -> None:
    """The same memory through the command line, as a reader would type it, while the local S3 still
    runs: the history, the undo of the restore, a verify."""
    for arguments in (["log", url, "--limit", "6"], undo, ["verify", url]):
        console.rule()
        console.print(Text(f"$ {COMMAND} {' '.join(arguments)}"), soft_wrap=True)  # whole, to copy
        environment = {**os.environ, "COLUMNS": str(console.width)}
        done = subprocess.run([COMMAND, *arguments], capture_output=True, text=True, check=False, env=environment)
        console.print(Text(done.stdout + done.stderr))
        if done.returncode != 0:
            raise SystemExit(f"{COMMAND} {' '.join(arguments)} failed (exit {done.returncode})")
    if local:
        console.print(
            f"The demo's local S3 stops when it ends, and its memory with it. {COMMAND} works the same on a "
            "local memory (a plain path) or a bucket of yours."
        )
    python = os.path.relpath(Path(sys.executable).with_name("python"))
    console.print(f"Run the demo on a real bucket: {python} -m examples.demo s3://your-bucket/team [--model ...]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", help="a real memory URL (default: a local moto S3 started for the demo)")
    parser.add_argument(
        "--model",
        help="a model for the agents, such as openai:gpt-5-mini, or 'scripted' for the offline script "
        "(default: openai:gpt-5-mini when OPENAI_API_KEY is set, else scripted)",
    )
    arguments = parser.parse_args()
    if arguments.url is None and importlib.util.find_spec("moto") is None:
        parser.exit(2, f"error: the demo's local S3 is moto: {install_hint('emulators')}; or give a bucket's URL\n")
    model = arguments.model or ("openai:gpt-5-mini" if os.environ.get("OPENAI_API_KEY") else "scripted")
    with ExitStack() as stack:
        url = arguments.url or _local_s3(stack)
        console.rule(f"[bold]bucket-memory demo[/bold]: {len(AGENTS)} agents share {url}")
        console.print(f"model: {model}" + (" (offline; --model NAME for a real one)" if model == "scripted" else ""))
        asyncio.run(seed(url))
        context = multiprocessing.get_context("spawn")
        barrier = context.Manager().Barrier(len(AGENTS))
        with ProcessPoolExecutor(len(AGENTS), mp_context=context) as pool:
            futures = [
                pool.submit(run_agent, url, name, None if model == "scripted" else model, barrier) for name in AGENTS
            ]
            reports = [future.result(timeout=300) for future in futures]
        for report in reports:
            console.print(
                f"[green]{report.name}[/green] finished after {report.tool_calls} tool calls: {report.output}"
            )
        undo = asyncio.run(show(url, reports))
        show_cli(url, undo, local=arguments.url is None)
        show_records(f"{url.rstrip('/')}-facts", context)


def show_records(url: str, context: Any) -> None:
    """Record memory beside the files: one agent's run adds a fact, another process's next run recalls it."""
    console.rule(f"[bold]record memory[/bold] at {url}")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        pool.submit(remember, url, "The team drinks green tea at standup.", "ada").result(timeout=300)
    console.print("[green]ada[/green]'s run called memory_record_add: The team drinks green tea at standup.")
    question = "Which tea should I bring to standup tomorrow?"
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        blocks = pool.submit(recall, url, question).result(timeout=300)
    if not blocks:
        raise SystemExit("grace's run recalled nothing: the record memory lost the fact")
    console.print(f"[green]grace[/green], in another process, asks only: {question}")
    console.print(Panel(Text(blocks[0]), title="recalled into grace's run before the model's first turn"))


def _local_s3(stack: ExitStack) -> str:
    """Start moto, point the standard AWS settings at it, and make a versioned bucket."""
    endpoint = stack.enter_context(moto_server())
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="demo",
        AWS_SECRET_ACCESS_KEY="demo",
        AWS_DEFAULT_REGION="us-east-1",
    )
    import botocore.session

    s3 = botocore.session.get_session().create_client("s3")
    s3.create_bucket(Bucket="agent-memory")
    s3.put_bucket_versioning(Bucket="agent-memory", VersioningConfiguration={"Status": "Enabled"})
    console.print(f"started a local S3 (moto) at {endpoint} with the versioned bucket agent-memory")
    return "s3://agent-memory/team"


if __name__ == "__main__":
    main()
