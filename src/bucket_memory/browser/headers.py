"""The headers every answer of the browser carries: no other page may frame it, and it runs only
its own script and styles.

Every port of 127.0.0.1 is the same site, so the SameSite cookie, the Origin check and the form
token do not stop a page on another port from framing a confirmation and luring the one click
that completes it; the frame headers do.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# frame-ancestors (and X-Frame-Options for browsers without CSP 2) refuses every frame; the rest
# admits script, styles and requests from the browser's own origin only, and keeps forms and a
# <base> from pointing anywhere else.
POLICY = "; ".join(
    [
        "default-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "base-uri 'none'",
        "object-src 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


class SecurityHeaders:
    """ASGI middleware setting `HEADERS` on every HTTP response the wrapped app starts, whoever made
    it: a page, a refusal, a redirect, an error or a static file. It wraps everything else, so no
    answer leaves without them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])  # optional in ASGI
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)
