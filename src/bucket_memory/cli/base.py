"""What every command shares: the app, its consoles, the options that reach a store, opening one,
the time syntax, confirmation of bulk changes, and JSON output."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, Annotated, Any, Literal

import click
import typer
from pydantic import TypeAdapter
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from . import interrupts, versioning
from .checks import checked_principal, checked_profile, checked_url
from .failures import EXIT_CODES, EXIT_NO_MEMORY, EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE, JsonFailuresGroup, fail
from .identity import cloud_identity, os_user
from .visible import VisibleConsole, visible_json

if TYPE_CHECKING:
    from a13n_harness.providers.memory import MemoryStoreError, Origin

    from ..admin import MemoryAdmin
    from ..fanout import Outcome
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


class _NoMemory(Exception):
    """The URL names a place where no memory was ever written."""


def run[T](
    work: Callable[[MemoryAdmin], Awaitable[T]],
    url: str,
    *,
    read_only: bool = False,
    new_ok: bool = False,
    log_only: bool = False,
    says_versioning: bool = False,
) -> T:
    """Open the memory, run `work` on it, and turn a store error into a message and exit code 3.

    A command that only reads opens the store `read_only`, so it needs only read permissions, and
    reaches S3 through obstore where the `fast` extra is installed: equal on deadlines and errors,
    it never creates, and it starts in a third less CPU (`docs/decisions/021-s3-layers.md`); so does
    one that writes through the log's own operations alone (`log_only`: put, rm, mv), which never
    touches stored versions. Unless `new_ok`, a URL where nothing was ever written is exit code 4
    (a mistyped URL). A change reads the bucket's versioning beside its work, and warns when it is
    off (`versioning.py`: once a day a bucket; through aiobotocore, which reads it), unless the
    command `says_versioning` itself."""
    from ..admin import MemoryAdmin
    from ..connect import open_store

    checking = not read_only and not says_versioning and versioning.to_check(url)
    fast = (read_only or (log_only and not checking)) and importlib.util.find_spec("obstore") is not None
    layer: Literal["aiobotocore", "obstore"] = "obstore" if fast else "aiobotocore"

    async def opened() -> T:
        with interrupts.cancelled_on_interrupt():
            async with open_store(url, read_only=read_only, s3_layer=layer) as store:
                if not new_ok and not await store.begun():  # a deleted memory is `memory_deleted`
                    raise _NoMemory
                admin = MemoryAdmin(store)
                if not checking:
                    return await _accounted(work, admin)
                warning = asyncio.create_task(versioning.warn_if_off(admin, url))
                try:
                    result = await _accounted(work, admin)
                except BaseException:
                    warning.cancel()
                    raise
                _warn(*await asyncio.gather(warning, return_exceptions=True))
                return result

    if not read_only:
        interrupts.changing(url)
    with store_errors():
        try:
            return _interruptible(opened)
        except _NoMemory:
            fail(
                "no_memory",
                f"no memory at {url}: nothing was ever written there.",
                hint="Check the URL (`bucket-memory memories s3://bucket` lists the memories in a bucket).",
                exit_code=EXIT_NO_MEMORY,
            )


def run_each[T](
    work: Callable[[MemoryAdmin], Awaitable[T]], url: str, concurrency: int, *, read_only: bool = True
) -> list[Outcome[T]]:
    """`work` on every memory under `url`, `concurrency` at a time, a progress bar counting
    memories; a memory's store error is its outcome, not the command's."""
    from ..fanout import each_memory

    async def each() -> list[Outcome[T]]:
        with interrupts.cancelled_on_interrupt(), progress("memories") as advance:
            return await each_memory(url, work, concurrency=concurrency, progress=advance, read_only=read_only)

    with store_errors():
        return _interruptible(each)


async def _accounted[T](work: Callable[[MemoryAdmin], Awaitable[T]], admin: MemoryAdmin) -> T:
    """`work(admin)`; however it ends, the intents it published and never saw settled are noted,
    so that an interrupt does not say "nothing was changed" of a write another writer may still fold."""
    try:
        return await work(admin)
    finally:
        interrupts.unsettled(admin.store.unsettled_intents())


def _warn(found: str | BaseException | None) -> None:
    """The versioning warning a change's check found, if any (a check that failed says nothing:
    the command's own outcome is what matters)."""
    if isinstance(found, str):
        err.print(found)


def _interruptible[T](work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(work())`; once Ctrl-C cancelled it, whatever it raised as it unwound is the
    interrupt (main() says what landed)."""
    try:
        return asyncio.run(work())
    except BaseException:
        if interrupts.interrupted():
            raise KeyboardInterrupt from None
        raise


@contextmanager
def store_errors() -> Iterator[None]:
    """A store error becomes a failure with its code and message, and exit code 3."""
    from a13n_harness.providers.memory import MemoryStoreError

    try:
        yield
    except MemoryStoreError as error:
        fail(error.code, str(error), hint=_hint(error), exit_code=EXIT_STORE)
    except (click.ClickException, typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
        raise  # a usage error keeps its exit code 2; an interrupt and a closed pipe are main()'s
    except Exception as error:  # a failure nobody mapped: still a message and exit code 3, not a traceback
        fail(
            "unexpected",
            f"{type(error).__name__}: {error}",
            hint="bucket-memory did not expect this failure: if it persists, report it with its command line.",
            exit_code=EXIT_STORE,
        )


def _hint(error: MemoryStoreError) -> str | None:
    """What the command line adds to a store's message: for a file found at another version, the
    option that changes it at that version."""
    if error.code != "version_mismatch" or error.current is None:
        return None
    found = error.current
    return (
        f"Pass --expected {found.version} to change it only while it is at version {found.version} "
        f"(`bucket-memory log URL {found.path}` shows who changed it)."
    )


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
