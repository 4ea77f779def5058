"""What every command shares: the app, its consoles, the options that reach a store and the origin
they make, the time syntax, confirmation of bulk changes, and JSON output (`running` opens the store)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import TypeAdapter
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from . import interrupts
from .checks import checked_principal, checked_profile, checked_url
from .failures import EXIT_CODES, EXIT_PROBLEMS, EXIT_USAGE, JsonFailuresGroup, fail
from .identity import cloud_identity, os_user
from .visible import VisibleConsole, visible_json

if TYPE_CHECKING:
    from a13n_harness.providers.memory import Origin

    from ..reports import Changeset

URL_FORMS = "s3://bucket/prefix, gs://bucket/prefix, file:///absolute/path, or a plain path"

app = typer.Typer(
    name="bucket-memory",
    help=f"Look after agent file memories kept in S3, GCS or a local directory.\n\nURLs: {URL_FORMS}.\n\n{EXIT_CODES}",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    suggest_commands=False,  # click suggests a near command itself: typer's would say it twice
    cls=JsonFailuresGroup,
)
# Paths, texts and messages come from the memory: printed literally, never read as rich markup, and
# with their control characters shown, never acted on by the terminal (visible.py).
out = VisibleConsole(soft_wrap=True, markup=False, highlight=False)
err = VisibleConsole(stderr=True, soft_wrap=True, markup=False, highlight=False)


Url = Annotated[str, typer.Argument(help=f"The memory: {URL_FORMS}.", show_default=False, callback=checked_url)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts (its schema: docs/cli/schemas/).")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Make the changes without asking (needed off a terminal).")]
_LISTED = 20


@dataclass(frozen=True, slots=True)
class Cloud:
    """The options that reach the cloud, given on the command line; the environment fills the rest."""

    profile: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    project: str | None = None
    principal: str | None = None

    def environment(self) -> dict[str, str]:
        given = {
            "AWS_PROFILE": self.profile,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            # The S3 endpoint only: STS, which names the caller, keeps its own.
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "GOOGLE_CLOUD_PROJECT": self.project,
        }
        return {name: value for name, value in given.items() if value is not None}


_cloud: ContextVar[Cloud | None] = ContextVar("bucket_memory_cli_cloud", default=None)

_CLOUD_PARAMETERS = [
    inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, typer.Option(help=text, rich_help_panel="Cloud", callback=check)],
    )
    for name, text, check in (
        ("profile", "AWS: the profile from ~/.aws/config (else AWS_PROFILE).", checked_profile),
        ("region", "AWS: the region (else AWS_REGION / AWS_DEFAULT_REGION).", None),
        ("endpoint_url", "S3: an endpoint such as http://127.0.0.1:5000 (else AWS_ENDPOINT_URL).", None),
        ("project", "GCS: the Google Cloud project (else GOOGLE_CLOUD_PROJECT).", None),
        (
            "principal",
            "Who changes are attributed to (else the cloud identity, else the OS user).",
            checked_principal,
        ),
    )
]


def command(
    name: str | None = None, *, group: typer.Typer = app
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command of the app (or of a `group` of it) that opens a store: it takes the cloud options,
    which hold while it runs."""

    def register(function: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(function, eval_str=True)

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> None:
            cloud = Cloud(**{parameter.name: kwargs.pop(parameter.name) for parameter in _CLOUD_PARAMETERS})
            token = _cloud.set(cloud)
            try:
                with _environment(cloud.environment()):
                    function(*args, **kwargs)
            finally:
                _cloud.reset(token)

        run.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*signature.parameters.values(), *_CLOUD_PARAMETERS]
        )
        group.command(name, help=reflowed(function.__doc__ or ""))(run)
        return function

    return register


def reflowed(doc: str) -> str:
    """A command's docstring as its help: each paragraph one line, which the terminal wraps at its
    width (a docstring's line breaks would otherwise break the help mid-phrase), and each example
    a paragraph of its own."""
    paragraphs: list[str] = []
    for block in inspect.cleandoc(doc).split("\n\n"):
        lines: list[str] = []
        for line in block.splitlines():
            if line.startswith("Example") and lines:
                paragraphs.append(" ".join(lines))
                lines = []
            lines.append(line.strip())
        paragraphs.append(" ".join(lines))
    return "\n\n".join(paragraphs)


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def origin(command_name: str, url: str) -> Origin:
    """The origin of an operator's change: the --principal, the cloud identity, or the OS user."""
    from a13n_harness.providers.memory import Origin

    given = _cloud.get()
    principal = (given.principal if given else None) or cloud_identity(url) or os_user()
    made = Origin(run_id=f"bucket-memory {command_name}", principal_id=principal)
    interrupts.named(made)
    return made


async def named(command_name: str, url: str) -> Origin:
    """`origin`, from a coroutine: naming the caller can ask STS, a blocking call of seconds, so it
    runs in a worker thread (which carries the command's context, its --principal among it)."""
    return await asyncio.to_thread(origin, command_name, url)


def naming(command_name: str, url: str) -> asyncio.Task[Origin]:
    """`named`, started now so that asking STS overlaps the command's reads (a put's own GET and the
    STS call took a round trip each, one after the other); awaited when the commit needs it."""
    task = asyncio.create_task(named(command_name, url))
    task.add_done_callback(lambda done: done.cancelled() or done.exception())  # one never awaited: no warning
    return task


_RELATIVE = re.compile(r"(\d+)\s*(s|m|h|d|w)")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
TIME_HELP = "ISO 8601 (2026-11-30T17:06:47Z; UTC if no zone) or a time ago such as 90s, 30m, 2h, 7d"


def moment(text: str) -> datetime:
    """A time on the command line: ISO 8601, or an age such as `2h` meaning that long ago."""
    try:
        if relative := _RELATIVE.fullmatch(text.strip()):
            return datetime.now(UTC) - timedelta(**{_UNITS[relative[2]]: int(relative[1])})
        parsed = datetime.fromisoformat(text)
    except (ValueError, OverflowError):
        raise typer.BadParameter(f"{text[:40]!r} is not a time: give {TIME_HELP}.") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def confirm(changes: Changeset, what: str, yes: bool) -> bool:
    """Show what a bulk change will do; whether to go on (False: nothing to change). Off a terminal
    it needs --yes; on one the user says."""
    if not changes.written and not changes.deleted:
        return False
    say = err  # stdout carries the command's result (JSON with --json)
    say.print(
        f"{what} would write {count(changes.written, 'file')} and delete {count(changes.deleted, 'file')} "
        f"(as of commit {changes.seq}):"
    )
    for verb, paths in (("write ", changes.written), ("delete", changes.deleted)):
        listed(verb, paths)
    ask(yes)
    return True


def listed(verb: str, names: Sequence[str]) -> None:
    """Names a change would touch, the first few of them, on stderr."""
    for name in names[:_LISTED]:
        err.print(f"  {verb} {name}")
    if len(names) > _LISTED:
        err.print(f"  ... and {len(names) - _LISTED} more to {verb.strip()}")


def ask(yes: bool) -> None:
    """Go on with a change just shown: at once with --yes; off a terminal, never without it; on one,
    when the user says so."""
    if yes:
        return
    if not sys.stdin.isatty():
        fail(
            "needs_yes",
            "Not on a terminal: pass --yes to make these changes. Nothing was changed.",
            exit_code=EXIT_USAGE,
        )
    if not typer.confirm("Make these changes?", default=False, err=True):
        fail("declined", "Nothing was changed.", exit_code=EXIT_PROBLEMS)


def emit(value: object, as_json: bool, human: Callable[[], object]) -> None:
    """The command's result (a model, a dataclass, or a list of them): JSON on stdout, whose schema
    is the contract, or `human`."""
    if not as_json:
        human()
        return
    adapter: TypeAdapter[Any] = TypeAdapter(list[Any] if isinstance(value, list) else type(value))
    sys.stdout.write(visible_json(adapter.dump_json(value, indent=2).decode()) + "\n")


@contextmanager
def progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, fed (done, total)."""
    with Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), console=err, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def count(items: Sized, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def keys(names: Sequence[str]) -> str:
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:3])}, ... {', '.join(names[-2:])}"


def version_callback(value: bool) -> None:
    if value:
        out.print(f"bucket-memory {package_version('bucket-memory')}")
        raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Look after agent file memories kept in S3, GCS or a local directory."""
