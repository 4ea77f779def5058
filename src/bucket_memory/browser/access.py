"""Who may use the browser: the holder of its secret token, from this machine, through its own pages.

The token comes once in the URL `bucket-memory browse` prints; the first request swaps it for an
HttpOnly, SameSite=Strict cookie and a redirect that drops it from the address bar. Every later
request needs the cookie. A request whose Host is not the loopback address the server bound
(DNS rebinding), or a change (POST) that a browser says came from another origin (its
Sec-Fetch-Site or Origin), is refused before any handler runs; the handler of a change then
needs the token in its form too.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "bucket_memory_browse"
# A form field, so that a change needs the token twice: as the cookie and in the page it came from.
FORM_FIELD = "token"


def new_token() -> str:
    return secrets.token_urlsafe(32)


class TokenAccess:
    """ASGI middleware admitting only requests that carry `token`, addressed to `host` (host:port)."""

    def __init__(self, app: ASGIApp, *, token: str, host: str) -> None:
        self.app = app
        self.token = token
        self.hosts = {host, host.replace("127.0.0.1", "localhost", 1)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        headers = connection.headers
        if headers.get("host") not in self.hosts:
            await _refuse("This server answers only at the address bucket-memory browse printed.")(scope, receive, send)
            return
        query = connection.query_params
        if self.matches(query.get("token")):
            rest = urlencode([(key, value) for key, value in query.multi_items() if key != "token"])
            redirect = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), status_code=303)
            redirect.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            await redirect(scope, receive, send)
            return
        if not self.matches(connection.cookies.get(COOKIE)):
            await _refuse("Open the link bucket-memory browse printed: it carries the page's secret token.")(
                scope, receive, send
            )
            return
        if scope["method"] not in ("GET", "HEAD") and not self.from_own_page(headers):
            await _refuse("A change must come from the browser's own page.")(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def matches(self, given: object) -> bool:
        return same_token(given, self.token)

    def from_own_page(self, headers: Headers) -> bool:
        """Whether what the browser says of a change's source admits it. Another port of 127.0.0.1 is
        the same site (so the cookie comes along) but another origin, and that is what is checked."""
        site = headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            return False
        origin = headers.get("origin")
        if origin == "null":
            # Under Referrer-Policy no-referrer a browser sends this for the page's own forms, and
            # so does any page that asks for it: only Sec-Fetch-Site tells them apart.
            return site == "same-origin"
        # No Origin: not a browser (every browser sends one with a POST); the form token decides.
        return origin is None or origin.removeprefix("http://") in self.hosts


def same_token(given: object, token: str) -> bool:
    """Whether `given` (a form's field, the cookie, the link's query) is the token, in constant time."""
    return isinstance(given, str) and secrets.compare_digest(given.encode(), token.encode())


def _refuse(message: str) -> PlainTextResponse:
    return PlainTextResponse(message, status_code=403)
