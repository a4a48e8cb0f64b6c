"""Server URLs as the doctor and the bench take them, and what a failed request met, in words for one CLI line.

`http_url_problem` checks a URL before anything connects; `open_url` sends a URL's ``user:password@`` as HTTP basic
auth; `redacted_url` shows it as ``user:***`` wherever a URL is printed or written; `connection_words` says what a
connection met (nothing listening, no such host, no answer in time) without errno numbers; `body_message` reads the
message a server put in an error body."""

from __future__ import annotations

import base64
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

__all__ = ["address_of", "body_message", "connection_words", "failure_words", "http_url_problem", "open_url", "redacted_url"]


def address_of(url: str) -> tuple[str, int]:
    """The host and port ``url`` connects to (the scheme's default port where it names none or no valid one)."""
    where = urllib.parse.urlsplit(url)
    try:
        port = where.port
    except ValueError:  # out of range: `http_url_problem` says so before anything connects
        port = None
    return where.hostname or "", port or (443 if where.scheme == "https" else 80)


def http_url_problem(url: object) -> Optional[str]:
    """What keeps ``url`` from being a server's http(s) URL ("not an http(s) URL", "no host", "port 99999 is not
    a TCP port (1 to 65535)"), or ``None``. A port out of range must not reach the resolver, which wraps it round
    (99999 to 34463) and connects there."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "not an http(s) URL"
    where = urllib.parse.urlsplit(url)
    if not where.hostname:
        return "no host"
    tail = where.netloc.rpartition("@")[2].rpartition("]")[2]  # past any user:password@ and an IPv6 literal
    port_text = tail.rpartition(":")[2] if ":" in tail else ""
    if port_text and (not port_text.isdigit() or not 1 <= int(port_text) <= 65535):
        return f"port {port_text} is not a TCP port (1 to 65535)"
    return None


def redacted_url(url: Optional[str]) -> Optional[str]:
    """``url`` with the password of its user part as ``***`` (``http://alice:***@proxy:8000/v1``), for run files,
    reports and error lines: a server behind basic auth is given as such a URL, and a password must not travel
    with what is shared."""
    if not url or "@" not in url:
        return url
    parts = urllib.parse.urlsplit(url)
    userinfo, _, host = parts.netloc.rpartition("@")
    if ":" not in userinfo:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{host}"))


def open_url(url: str, timeout: float) -> Any:
    """``urllib.request.urlopen(url)``, with a ``user:password@`` in the URL sent as HTTP basic auth (urllib would
    take it for part of the host name): how a metrics endpoint behind basic auth is given, as Prometheus allows."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 - the caller's server
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()).decode()
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=host)), headers={"Authorization": f"Basic {token}"})
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - the caller's server


def _socket_error(exc: BaseException) -> Optional[BaseException]:
    """The socket-level error somewhere in ``exc``'s chain (causes, contexts, urllib's ``reason``)."""
    seen: set[int] = set()
    stack: list[Optional[BaseException]] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (ConnectionRefusedError, socket.gaierror, TimeoutError)):  # socket.timeout too (3.10+)
            return e
        reason = getattr(e, "reason", None)  # urllib's URLError
        stack += [reason if isinstance(reason, BaseException) else None, e.__context__, e.__cause__]
    return None


def connection_words(exc: BaseException, url: str) -> Optional[str]:
    """What connecting to ``url`` met, in words ("nothing answers at host H port P (connection refused); ..."),
    where ``exc`` or an exception it came from is a refused connection, an unknown host or a timeout; else ``None``."""
    found = _socket_error(exc)
    if found is None:
        return None
    host, port = address_of(url)
    if isinstance(found, ConnectionRefusedError):
        return f"nothing answers at host {host} port {port} (connection refused); is the server up, and is it its port?"
    if isinstance(found, socket.gaierror):
        return f"host {host!r} not found ({found.strerror or found})"
    return f"host {host} port {port} gave no answer in time (timed out)"


def failure_words(exc: BaseException, url: str) -> str:
    """Why a request to ``url`` failed, in words for one line: the HTTP status and what the server said (urllib's
    ``HTTPError``, whose message `fetch_metrics` fills from the body; an SDK's status error, its body read here),
    else what the connection met (`connection_words`), else the error's own text without errno numbers."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    status, response = getattr(exc, "status_code", None), getattr(exc, "response", None)
    if isinstance(status, int) and response is not None:
        said = body_message(bytes(getattr(response, "content", b"") or b"")[:4096])
        return f"HTTP {status}" + (f": {said}" if said else "")
    words = connection_words(exc, url)
    if words is not None:
        return words
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


def body_message(body: bytes) -> Optional[str]:
    """The message of an error body on one line: a JSON error's (``error.message``, ``error``, ``message``,
    ``detail``: llama.cpp, OpenAI-style, FastAPI) or a text body's first line; ``None`` for an HTML page."""
    text = body.decode("utf-8", "replace").strip()
    if not text or text.startswith("<"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        found: object = text.splitlines()[0]
    else:
        found = _json_message(data)
    if not isinstance(found, str) or not found.strip():
        return None
    line = " ".join(found.split())
    return line if len(line) <= 300 else line[:299] + "…"


def _json_message(data: object) -> Optional[str]:
    if not isinstance(data, dict):
        return None
    for key in ("error", "message", "detail"):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("message")
        if isinstance(value, str) and value.strip():
            return value
    return None
