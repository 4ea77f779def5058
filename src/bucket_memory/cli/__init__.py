"""The `bucket-memory` command: look after a memory at an s3://, gs://, file:// URL or a plain path.

`base` holds what every command shares; `running` how one runs its work on a memory; `failures` how
a command fails; `interrupts` what one stopped by Ctrl-C says it left; `tables` how it shows a
table; `visible` how what a memory holds is printed without the terminal acting on it; `files`,
`history`, `erase`, `destroy`, `records` and `browse` hold the commands, and the operator's
`import_export`, `maintenance` and `provisioning`; `output` the models of their --json output.
Importing this package registers every command; `--help` and docs/cli.md list them in the order
`failures.HELP_ORDER` gives, the day's commands first. The commands import the store's modules inside their bodies:
`--help` and `--version` then import neither the harness's memory package (most of a second) nor
a cloud SDK, which `test_help_and_version_import_nothing_of_the_store` holds.
"""

import atexit
import os
import sys
import traceback

# pydantic loads its plugins at the first model it builds, which importing the commands does:
# logfire's (the harness brings logfire) is there to trace an application's validation, costs a
# third of a second of every command's start, and would trace nothing here. It stays off unless
# PYDANTIC_DISABLE_PLUGINS says otherwise.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "logfire-plugin")

from . import browse, destroy, erase, files, history, import_export, interrupts, maintenance, provisioning, records
from .base import app
from .failures import EXIT_NO_MEMORY, EXIT_PIPE, EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE, ReaderGone


def main() -> None:
    """The `bucket-memory` program. It ends with `os._exit` once its output is flushed and the exit
    hooks have run, never by finalizing the interpreter: obstore's runtime (tokio) hands each result
    to the event loop from a thread of its own, which lets go of the GIL inside
    `call_soon_threadsafe` and takes it back later; a command that ends before it does left that
    thread to take the GIL from a finalizing interpreter, which on Python 3.13 ends it with
    `pthread_exit`, and the unwind through Rust's frames aborted the process (issue 45: exit -6
    after the command's own error, once in a few hundred runs on a loaded machine)."""
    try:
        app()
        code = 0
    except SystemExit as done:
        code = _status(done.code)
    except KeyboardInterrupt:
        print(interrupts.outcome(), file=sys.stderr)
        code = interrupts.EXIT_INTERRUPTED
    except ReaderGone:  # `| head`: stop quietly, as coreutils and git do when SIGPIPE ends them
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is still buffered, to nowhere
        code = EXIT_PIPE
    except BaseException:  # what click does not catch: its traceback, as Python would print it
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # logging's flush, a host's OpenTelemetry exporters, coverage, temporary files
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (`| head -0`) as the output is flushed
            code = code or EXIT_PIPE
    os._exit(code)


def _status(code: object) -> int:
    """The exit status `sys.exit(code)` asks for, as the interpreter would make it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


__all__ = [
    "EXIT_NO_MEMORY",
    "EXIT_PROBLEMS",
    "EXIT_STORE",
    "EXIT_USAGE",
    "app",
    "browse",
    "destroy",
    "erase",
    "files",
    "history",
    "import_export",
    "main",
    "maintenance",
    "provisioning",
    "records",
]
