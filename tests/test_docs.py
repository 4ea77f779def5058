"""The docs' code runs as written: every `python` block of the guide and the deployment pages
(S3 ones against moto, GCS ones against fake-gcs-server), the telemetry wiring, the README's
quickstart, and each `bucket-memory` command of the deployment pages' shell blocks (their other
commands run in test_guide_runner.py, the operations playbooks in test_playbooks.py). Every other
block of README.md and docs/ says on the line before it why no test runs it (`<!-- not run: ... -->`),
and `test_every_block_runs_or_says_why_not` holds each block to one or the other."""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .helpers import cli
from .test_guide_runner import _commands as guide_commands
from .test_guide_runner import commands_run, flat, needs_a_cloud
from .test_playbooks import PLAYBOOKS

DOCS = Path(__file__).parent.parent / "docs"
PAGES = ["guide.md", "deploy-lambda.md", "deploy-cloud-run.md"]


def blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", (DOCS / page).read_text(), flags=re.S | re.M)


PYTHON = [(page, source) for page in PAGES for source in blocks(page, "python")]
ROOT = DOCS.parent
README = (ROOT / "README.md").read_text()
EMULATOR = re.compile(r"^python -m bucket_memory\.testing\.emulators .*$", re.M)


def emulator_before(page: str, source: str) -> str | None:
    """The emulator command a page tells to start before a block, if any (the "Try it" sections)."""
    text = (DOCS / page).read_text()
    started = EMULATOR.findall(text[: text.index(source)])
    return started[-1] if started else None


def assert_printed(source: str, output: str) -> None:
    """Each `# prints: TEXT` comment of a block (`…` stands for anything) matches a line the block
    printed, in order."""
    expected = re.findall(r"#\s*prints:\s*(.*)$", source, flags=re.M)
    lines = iter(output.splitlines())
    for text in expected:
        pattern = re.compile(".*?".join(re.escape(part) for part in text.strip().split("…")))
        assert any(pattern.fullmatch(line) for line in lines), f"printed no line like {text!r}:\n{output}"


def _bucket_for(source: str, request: pytest.FixtureRequest) -> None:
    """Start the emulator a block's URLs name and create their bucket."""
    if found := re.search(r"s3://([^/\"\s]+)", source):
        request.getfixturevalue("s3_endpoint")
        import botocore.session

        client: Any = botocore.session.get_session().create_client("s3")
        if found[1] not in {bucket["Name"] for bucket in client.list_buckets()["Buckets"]}:
            client.create_bucket(Bucket=found[1])
    if found := re.search(r"gs://([^/\"\s]+)", source):
        request.getfixturevalue("gcs_endpoint")
        from google.cloud import storage

        client = storage.Client()
        if client.lookup_bucket(found[1]) is None:
            client.create_bucket(found[1])
        client.close()


@pytest.fixture
def cold_lambda() -> Iterator[None]:
    """A page that runs the Lambda handler leaves its warm store behind: close it after."""
    yield
    handler: Any = sys.modules.get("examples.lambda_handler")
    if handler is not None and handler.store is not None:
        handler.loop.run_until_complete(handler.resources.aclose())
        handler.store = None


@pytest.mark.parametrize(("page", "source"), PYTHON, ids=[f"{page}-{n}" for n, (page, _) in enumerate(PYTHON)])
def test_python_block_runs(
    page: str,
    source: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if (emulator := emulator_before(page, source)) is not None:
        assert_printed(source, run_as_printed(emulator, source))
        return
    _bucket_for(source, request)
    for name in ("MEMORY_URL", "CONVERSATIONS_URL", "MODEL"):
        monkeypatch.setenv(name, "")  # recorded as it was, so what the block sets is undone after
        monkeypatch.delenv(name)
    request.getfixturevalue("cold_lambda")
    script = tmp_path / "example.py"
    script.write_text(source)
    runpy.run_path(str(script), run_name="__main__")
    assert_printed(source, capsys.readouterr().out)


def run_as_printed(emulator: str, source: str) -> str:
    """Start the emulator as the page says, take the `export` lines it prints into a clean
    environment, and run the block with `python -` from the repository root; what it printed."""
    server = subprocess.Popen([sys.executable, *shlex.split(emulator)[1:]], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert server.stdout is not None
        environment = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "STORAGE_"))}
        for line in server.stdout:
            if line.startswith("#"):
                break
            name, _, value = line.removeprefix("export ").strip().partition("=")
            environment[name] = value
        done = subprocess.run(
            [sys.executable, "-"],
            input=source,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=environment,
            timeout=240,
            check=False,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    for noise in ("was never awaited", "Unclosed client session", "Traceback"):
        assert noise not in done.stderr, done.stderr
    return done.stdout


def test_the_pages_have_examples() -> None:
    assert len(blocks("guide.md", "python")) >= 4
    assert all(blocks(page, "python") for page in PAGES[1:])


COMMANDS = [
    (page, command)
    for page in PAGES[1:]
    for block in blocks(page, "sh")
    for command in block.replace("\\\n", " ").splitlines()
    if command.startswith("bucket-memory ")
]


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{page}-{n}" for n, (page, _) in enumerate(COMMANDS)])
def test_bucket_memory_commands_run(page: str, command: str, request: pytest.FixtureRequest) -> None:
    # Step 5 looks at what `terraform output -raw memory_url` names: here, the page's "Try it" memory.
    (tried,) = set(re.findall(r'"MEMORY_URL", "(\S+)"', (DOCS / page).read_text()))
    command = command.replace('"$MEMORY"', tried)
    _bucket_for(command, request)
    arguments = shlex.split(command)[1:]
    url = next(argument for argument in arguments if "://" in argument)
    cli("put", url, "notes/plan.md", given="ship on friday\n")  # a memory to look at
    assert cli(*arguments)


def test_the_telemetry_wiring_installs_the_sdk() -> None:
    """Run apart from this process, whose providers the telemetry tests install (one per process)."""
    (wiring,) = blocks("operations.md", "python")
    check = (
        "from opentelemetry import metrics, trace\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "assert isinstance(trace.get_tracer_provider(), TracerProvider)\n"
        "assert isinstance(metrics.get_meter_provider(), MeterProvider)\n"
    )
    environment = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_METRIC_EXPORT_INTERVAL": "600000"}
    completed = subprocess.run(
        [sys.executable, "-c", wiring + check],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **environment},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr


def test_the_readme_quickstart_runs(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its commands in order against moto (pip and aws iam aside), then agent.py with pydantic-ai's test model."""
    readme = (DOCS.parent / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    (commands,) = re.findall(r"^```sh\n(.*?)^```", quickstart, flags=re.S | re.M)
    (agent,) = re.findall(r"^```python\n(.*?)^```", quickstart, flags=re.S | re.M)
    lines = commands.splitlines()
    assert len(lines) <= 10, "the quickstart promises at most ten commands"
    request.getfixturevalue("s3_endpoint")
    ran = []
    for line in lines:
        piped = re.fullmatch(r'echo "(.*)" \| (bucket-memory .*)', line)
        command = piped[2] if piped else line.split(" > ")[0]
        environment, _, rest = command.partition(" python ")
        if rest == "agent.py" and re.fullmatch(r"(\w+=\S+ ?)+", environment):
            for assignment in environment.split():
                monkeypatch.setenv(*assignment.split("=", 1))
            command = "python agent.py"
        if command.startswith("bucket-memory "):
            printed = cli(*shlex.split(command)[1:], given=f"{piped[1]}\n" if piped else None)
            ran.append((command.split()[1], printed))
        elif command == "python agent.py":
            script = tmp_path / "agent.py"
            script.write_text(agent)
            runpy.run_path(str(script), run_name="__main__")
            ran.append(("agent.py", ""))
    assert [name for name, _ in ran] == ["init", "policy", "put", "cat", "agent.py"]
    assert "The release moves to Friday." in dict(ran)["cat"]
    assert "arn:aws:s3:::acme-team-memory/teams/blue/*" in dict(ran)["policy"]
    listed = cli("ls", "s3://acme-team-memory/teams/blue", "--json")
    assert [entry["path"] for entry in json.loads(listed)] == ["notes/release.md"], "the agent wrote no junk"


# Every code block of these pages (the Terraform READMEs' too) runs in a test as printed (here, in
# test_guide_runner.py or test_playbooks.py: `unrun` knows which), or says why not in a comment on
# the line before it: `<!-- not run: REASON -->`.
ACCOUNTED_PAGES = [
    "README.md",
    *(f"docs/{page.name}" for page in sorted(DOCS.glob("*.md"))),
    *(str(page.relative_to(ROOT)) for page in sorted((ROOT / "terraform").rglob("README.md"))),
]
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->\n\Z")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    source: str
    reason: str | None  # the page's `not run` comment before it, if any


def fenced(page: str) -> list[Block]:
    text = (ROOT / page).read_text()
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        before = text[: match.start()]
        reason = NOT_RUN.search(before)
        found.append(Block(page, before.count("\n") + 1, match[1], match[2], reason[1] if reason else None))
    return found


def unrun(block: Block) -> list[str]:
    """What of `block` no test runs as printed: the commands of a shell block the tests skip, or
    the whole block; [] when all of it runs. Commands a guide's runner stops at because they need a
    cloud are accounted for by its own table of reasons (`test_guide_runner.NEEDS_A_CLOUD`)."""
    page, source = block.page, block.source
    if block.language == "python" and page in {f"docs/{name}" for name in PAGES}:
        return []  # test_python_block_runs
    if page == "docs/operations.md" and (block.language == "python" or source in PLAYBOOKS.values()):
        return []  # the telemetry wiring; test_playbooks.py
    if page == "docs/cli.md" and re.fullmatch(r"Usage: bucket-memory .*\n", source):
        return []  # test_cli_reference: the app's own usage line
    if page == "README.md" and source in README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]:
        quickstart = r"(^|\| )bucket-memory |^\w+=\S+ python agent\.py$"  # test_the_readme_quickstart_runs
        return [line for line in source.splitlines() if block.language == "sh" and not re.search(quickstart, line)]
    if block.language == "sh" and page in {f"docs/{name}" for name in PAGES[1:]}:
        ran = commands_run(page.removeprefix("docs/"))
        return [
            flat(command)
            for command in guide_commands(f"```sh\n{source}```")
            if flat(command) not in ran and not command.startswith("bucket-memory ") and not needs_a_cloud(command)
        ]
    return [source]


ALL_BLOCKS = [block for page in ACCOUNTED_PAGES for block in fenced(page)]


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[f"{block.page}:{block.line}" for block in ALL_BLOCKS])
def test_every_block_runs_or_says_why_not(block: Block) -> None:
    """Issue 56: a block no test runs must say why on the line before it, and one that runs must not
    (its reason would be stale). A shell block parses (`bash -n`) either way."""
    missing = unrun(block)
    if block.reason is None:
        assert not missing, (
            f"{block.page}:{block.line}: no test runs this and no `<!-- not run: ... -->` says why: {missing}"
        )
    else:
        assert missing, f"{block.page}:{block.line}: says `not run: {block.reason}`, but the tests run all of it"
    if block.language == "sh":
        checked = subprocess.run(["bash", "-n"], input=block.source, capture_output=True, text=True, check=False)
        assert checked.returncode == 0, f"{block.page}:{block.line}: {checked.stderr}\n{block.source}"


def test_the_accounting_finds_what_runs_and_what_does_not() -> None:
    """The rule itself: blocks that run and blocks that cannot, one of each kind, so that a rule
    that matched everything (or nothing) fails here rather than passing every page."""
    by_start = {(block.page, block.source.splitlines()[0]): block for block in ALL_BLOCKS if block.source.strip()}
    assert unrun(by_start[("README.md", "import asyncio")]) == []
    assert unrun(by_start[("README.md", "pip install '.[s3]'")]) == [
        "pip install '.[s3]'",
        "aws iam put-role-policy --role-name my-agent --policy-name bucket-memory "
        "--policy-document file://memory-policy.json",
    ]
    assert unrun(by_start[("docs/deploy-lambda.md", "REGION=eu-west-1")]) == []
    assert unrun(by_start[("docs/deploy-cloud-run.md", "cd terraform/examples/cloud-run")])
    assert unrun(by_start[("docs/design.md", "<prefix>/log/00000000000000000001.json          commit 1")])
    assert unrun(fenced("docs/cli.md")[0]) == [] and len(fenced("docs/cli.md")) > 20
