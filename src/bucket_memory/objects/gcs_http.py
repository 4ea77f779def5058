"""Blocking HTTP calls that a deadline can cut off, for the GCS client that runs in worker threads.

requests bounds each socket read, never a whole reply, so a server that drips a byte at a time
holds a worker thread for ever, and cancelling the awaiting coroutine does not stop the thread.
`AbortableCall` notes the connections a call checks out of the session's pools (through the pool
classes `make_abortable` installs); `abort` shuts their sockets down, which ends any read in
progress at once, so the thread returns and the connection is discarded.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()


class CallAborted(Exception):
    """The call was aborted before it could check out a connection."""


class AbortableCall:
    """One blocking call's connections, so that another thread can cut the call off.

    `run` runs the call in the current (worker) thread; `abort`, from any thread, shuts down the
    sockets the call holds and refuses it any new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[Any] = set()
        self._aborted = False

    def run[T](self, call: Callable[[], T]) -> T:
        _current.call = self
        try:
            return call()
        finally:
            _current.call = None

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            held, self._held = self._held, set()
        for connection in held:
            sock = getattr(connection, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def hold(self, connection: Any) -> None:
        with self._lock:
            if self._aborted:
                raise CallAborted("the call was cut off at its deadline")
            self._held.add(connection)

    def release(self, connection: Any) -> None:
        with self._lock:
            self._held.discard(connection)


def _noted(pool: type[HTTPConnectionPool]) -> type[HTTPConnectionPool]:
    """A pool class that tells the calling thread's `AbortableCall` which connections it checks out."""

    class Noted(pool):  # type: ignore[valid-type, misc]
        def _get_conn(self, timeout: float | None = None) -> Any:
            connection = super()._get_conn(timeout)
            call: AbortableCall | None = getattr(_current, "call", None)
            if call is not None:
                try:
                    call.hold(connection)
                except CallAborted:
                    super()._put_conn(connection)
                    raise
            return connection

        def _put_conn(self, connection: Any) -> None:
            call: AbortableCall | None = getattr(_current, "call", None)
            if call is not None and connection is not None:
                call.release(connection)
            super()._put_conn(connection)

    Noted.__name__ = f"Noted{pool.__name__}"
    return Noted


_POOLS = {"http": _noted(HTTPConnectionPool), "https": _noted(HTTPSConnectionPool)}


class _AbortableAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)


def make_abortable(session: requests.Session, *, pool_size: int) -> None:
    """Mount adapters on `session` whose connections an `AbortableCall` can shut down.

    Only the stock adapters are replaced: one the caller mounted (mutual TLS, say) is kept as is.
    """
    for scheme in ("http://", "https://"):
        if type(session.adapters.get(scheme)) is HTTPAdapter:
            session.mount(scheme, _AbortableAdapter(pool_connections=pool_size, pool_maxsize=pool_size))
