"""Who may read and who may act: the Host check, the launch token, its cookie, CSRF tokens.

A page of the inspector shows what a store holds, and an action changes a run,
so a browser on this machine must not be led to either by another site: the
Host header is checked (DNS rebinding points a foreign name at 127.0.0.1),
pages need the launch token (given once in the printed URL, then kept in a
cookie that other sites' requests do not carry), and a POST needs a CSRF
token derived from the launch token, which only the inspector's own pages hold.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode

from starlette.responses import PlainTextResponse, RedirectResponse

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "COOKIE",
    "LOOPBACK_NAMES",
    "Access",
    "HostCheck",
    "is_loopback",
    "new_token",
]

COOKIE: Final = "actorflow_ui_token"
LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def new_token() -> str:
    """A fresh launch token: unguessable, safe in a URL."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """True when ``host`` (a name or an address) is this machine only."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:80`` is ``[::1]``)."""
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostCheck:
    """ASGI middleware: a request whose Host header names no allowed host is refused (400)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self._app = app
        self._allowed = frozenset(h.lower() for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1").lower()
            if _host_name(host) not in self._allowed:
                refused = PlainTextResponse(
                    f"actorflow ui: Host {host!r} is not one this inspector serves "
                    f"(allowed: {', '.join(sorted(self._allowed))}); open the URL it printed",
                    status_code=400,
                )
                await refused(scope, receive, send)
                return
        await self._app(scope, receive, send)


class Access:
    """The launch token's rules for one app.

    ``token`` None means pages need no token (read-only mode without one);
    actions always need one, and a read-only app has no actions.
    """

    def __init__(self, token: str | None, *, read_only: bool) -> None:
        self.token = token
        self.read_only = read_only

    def csrf(self) -> str:
        """The CSRF token pages put in their forms: derived from the launch token."""
        if self.token is None:
            return ""
        return hmac.new(self.token.encode(), b"actorflow-ui-csrf", hashlib.sha256).hexdigest()

    def _holds_token(self, request: Request) -> bool:
        if self.token is None:
            return True
        given = request.cookies.get(COOKIE, "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    def gate(self, request: Request) -> Response | None:
        """What to answer instead of the page, or None when the request may go on.

        A GET carrying ``?token=`` sets the cookie and redirects to the same
        URL without it, so the token leaves the address bar and the history.
        """
        given = request.query_params.get("token")
        if given is not None and self.token is not None and request.method == "GET":
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return _forbidden("the token in this URL is not this inspector's")
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(query)}" if query else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return redirect
        if not self._holds_token(request):
            return _forbidden(
                "this inspector needs its launch token: open the URL `actorflow ui` printed "
                "(…/?token=…) once in this browser"
            )
        return None

    async def check_action(self, request: Request, form_csrf: str | None) -> Response | None:
        """What to answer instead of running an action (a POST), or None when it may run."""
        if self.read_only or self.token is None:
            return _forbidden("this inspector is read-only: it changes nothing")
        if not self._holds_token(request):
            return _forbidden("an action needs the launch token's cookie")
        if not form_csrf or not hmac.compare_digest(form_csrf.encode(), self.csrf().encode()):
            return _forbidden("the form's CSRF token is missing or wrong: reload the page")
        origin = request.headers.get("origin")
        if origin is not None and origin != "null":
            host = request.headers.get("host", "")
            if origin.split("://", 1)[-1] != host:
                return _forbidden(f"a request from {origin!r} may not act here")
        return None


def _forbidden(why: str) -> Response:
    return PlainTextResponse(f"actorflow ui: {why}", status_code=403)
