"""How a command that cannot go on says so: a code, a message and what to do, with its exit code.

People read `error (code): message` and then `hint: ...` on stderr, as git prints them. A command
line that holds --json gets one JSON object on stdout instead (docs/cli/schemas/error.json), for
every failure, the command line's own included: scripts read one stream and one shape."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NoReturn

import click
import typer
from pydantic import TypeAdapter, ValidationError
from rich.text import Text
from typer.core import TyperGroup

from . import interrupts
from .visible import VisibleConsole, visible_json

if TYPE_CHECKING:
    from .output import FailureCode


EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORE, EXIT_NO_MEMORY = 1, 2, 3, 4
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `git log | head -1`'s git, or coreutils' seq
EXIT_CODES = (
    "Exit codes: 0 done; 1 verify or doctor found a problem, grep or records search found nothing, or a change "
    "was declined; 2 the command line "
    "was wrong, or a change needs --yes off a terminal; 3 the store refused or failed (the message says why "
    "and what to do); 4 no memory at the URL (nothing was ever written there); 130 interrupted (Ctrl-C; one line says "
    "what landed); 141 the reader of its output went away (`| head`), silently, as git and coreutils do."
)

_as_json: ContextVar[bool] = ContextVar("bucket_memory_cli_json_failures", default=False)
_stderr = VisibleConsole(stderr=True, soft_wrap=True, markup=False, highlight=False)


def fail(code: FailureCode, message: str, *, exit_code: int, hint: str | None = None) -> NoReturn:
    """Report a failure (`report`) and end the command with `exit_code`."""
    report(code, message, hint)
    raise typer.Exit(exit_code)


def report(code: FailureCode, message: str, hint: str | None = None) -> None:
    """Say why a command failed; a code nobody defined (a store error made with an empty one) is
    told as `unexpected`, naming it: no failure is printed without a code."""
    from .output import Failed, Failure

    try:
        code = _codes().validate_python(code)
    except ValidationError:
        code, message = "unexpected", f"{message} (code {code!r})"
    if _as_json.get():
        failed = Failed(error=Failure(code=code, message=message, hint=hint))
        sys.stdout.write(visible_json(failed.model_dump_json(indent=2)) + "\n")
        return
    _stderr.print(Text("error", style="red"), Text(f" ({code}): {message}"), sep="")
    if hint:
        _stderr.print(f"hint: {hint}")


@functools.cache
def _codes() -> TypeAdapter[FailureCode]:
    from .output import FailureCode

    return TypeAdapter(FailureCode)


def asks_json(words: Sequence[str]) -> bool:
    """Whether a command line asks for --json: the flag before any `--` (after it, it is an argument)."""
    return "--json" in words[: words.index("--") if "--" in words else len(words)]


class ReaderGone(Exception):
    """The command's standard output is a pipe whose reader closed it (`| head -1`). click would
    exit 1 for it, which here means "found nothing"; main() ends with EXIT_PIPE instead."""


# The order --help and docs/cli.md list the commands in: a day's reading and writing first, then
# the records, setting up, moving files in and out, looking after a memory, and erasing.
HELP_ORDER = (
    *("ls", "cat", "put", "rm", "mv", "grep", "diff", "log", "restore", "rollback", "records", "browse"),
    *("memories", "init", "doctor", "policy", "import", "export", "verify", "stats", "recover", "compact"),
    *("erase", "destroy"),
)


class JsonFailuresGroup(TyperGroup):
    """The app's command group. It reads --json off the raw command line before parsing it, so
    that a failure anywhere, in parsing included, is reported as the command line asked; without
    --json, click and typer report their own usage errors as they always do. It lists its
    commands in HELP_ORDER (any it does not name last)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: HELP_ORDER.index(name) if name in HELP_ORDER else len(HELP_ORDER))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        token = _as_json.set(asks_json(words))
        try:
            return super().main(words, prog_name, complete_var, standalone_mode, windows_expand_args, **extra)
        finally:
            _as_json.reset(token)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _click_failures():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _click_failures():
            try:
                return super().invoke(ctx)
            except BrokenPipeError:
                raise ReaderGone from None
            except KeyboardInterrupt:  # typer would exit 130 and say nothing of what landed
                said = interrupts.outcome()
                if _as_json.get():
                    report("aborted", said)
                else:
                    _stderr.print(said)
                raise click.exceptions.Exit(interrupts.EXIT_INTERRUPTED) from None


@contextmanager
def _click_failures() -> Iterator[None]:
    """With --json, click's usage errors and aborts as JSON failures with their exit codes."""
    try:
        yield
    except click.ClickException as error:
        if isinstance(error, click.MissingParameter) and error.param is not None and error.param.name == "path":
            error = click.MissingParameter(_path_hint(error), ctx=error.ctx, param=error.param)
        if not _as_json.get():
            raise error from None
        where = error.ctx.command_path if isinstance(error, click.UsageError) and error.ctx else "bucket-memory"
        report("usage", error.format_message(), f"`{where} --help` lists its arguments and options.")
        raise click.exceptions.Exit(error.exit_code) from None
    except click.Abort:
        if not _as_json.get():
            raise
        report("aborted", "Stopped before it finished; nothing more was changed.")
        raise click.exceptions.Exit(EXIT_PROBLEMS) from None


def _path_hint(error: click.MissingParameter) -> str:
    """The missing PATH, with the aws-cli habit it likely comes from: a file's path run into the
    memory's URL (`cat s3://b/teams/blue/notes/release.md`), split as it might have been meant."""
    ctx = error.ctx
    url = ctx.params.get("url") if ctx is not None else None
    if not isinstance(url, str) or "://" not in url:
        return "The file's path in the memory comes after the memory's URL."
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    segments = [segment for segment in key.split("/") if segment]
    if len(segments) < 2:
        command = ctx.command_path if ctx is not None else "bucket-memory"
        return f"The file's path in the memory comes after the memory's URL: `{command} {url} notes/tea.md`."
    cut = len(segments) - (2 if len(segments) >= 3 else 1)
    memory = f"{scheme}://{bucket}/{'/'.join(segments[:cut])}"
    command = ctx.command_path if ctx is not None else "bucket-memory"
    return (
        f"The file's path is an argument of its own, after the memory's URL: if the memory is at {memory}, "
        f"`{command} {memory} {'/'.join(segments[cut:])}`."[:600]
    )
