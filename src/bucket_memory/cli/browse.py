"""`bucket-memory browse`: the memory browser, served on loopback for as long as the command runs."""

from __future__ import annotations

import socket
import webbrowser
from typing import Annotated

import typer

from .base import Url, command, err, origin, out
from .failures import EXIT_USAGE
from .records import EmbedderName, made_embedder
from .running import run


@command()
def browse(
    url: Url,
    write: Annotated[
        bool, typer.Option(help="Allow restoring files and rolling back the memory (each shown first, then confirmed).")
    ] = False,
    port: Annotated[int, typer.Option(min=0, max=65535, help="The loopback port; 0 picks a free one.")] = 0,
    open_page: Annotated[bool, typer.Option("--open/--no-open", help="Open the page in the default browser.")] = True,
    embedder: EmbedderName = None,
) -> None:
    """Serve a page to see, compare and undo what agents remember, until interrupted (Ctrl-C).

    It listens on 127.0.0.1 only, and only the link it prints (with its secret token) opens it. The
    page shows the files, each file's history (who, which run, which tool call), diffs between any
    two versions, the change feed as it happens, search, and records (searched by meaning too with
    --embedder; with --write, the vectors it makes are written back). Read-only unless --write.
    Example: bucket-memory browse s3://my-memories/team --write
    """
    try:
        import uvicorn

        from ..browser import browser_app, new_token
    except ImportError:
        from ..runtime.installing import install_hint

        err.print(f"browse needs its web stack: {install_hint('browse')}")
        raise typer.Exit(EXIT_USAGE) from None
    made = made_embedder(embedder)  # a name this installation cannot use is a usage error, before serving
    run(lambda admin: admin.store.list(), url, read_only=True)  # a wrong URL fails here, with its message
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", port))
        listener.listen(128)  # before the link is printed: a request that comes at once waits, not refused
    except OSError as error:
        err.print(f"cannot listen on 127.0.0.1:{port}: {error.strerror or error}; choose another --port or 0.")
        raise typer.Exit(EXIT_USAGE) from None
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    token = new_token()
    app = browser_app(url, token=token, host=host, writable=write, origin=origin("browse", url), embedder=made)
    link = f"http://{host}/?token={token}"
    out.print(f"Browsing {url} ({'writable' if write else 'read-only'}) at {link}")
    out.print("Keep the link to yourself: it opens the memory. Stop with Ctrl-C.")
    if open_page:
        webbrowser.open(link)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[listener])
