"""A loopback HTTP server that answers every GET with one status and body: a server refusing a route
(llama-server's /metrics without ``--metrics``, /v1/models without a valid key), as its error reaches a user."""

from __future__ import annotations

import base64
import contextlib
import http.server
import threading
from typing import Any, Iterator, Optional


@contextlib.contextmanager
def answering(status: int, content_type: str, body: bytes, basic_auth: Optional[tuple[str, str]] = None) -> Iterator[str]:
    """Serve ``status`` / ``body`` to every GET on 127.0.0.1; yields the root URL; stopped on exit. With
    ``basic_auth`` (user, password), a GET without those credentials gets 401 (as a metrics endpoint behind a
    reverse proxy's basic auth)."""
    expected = "Basic " + base64.b64encode(":".join(basic_auth).encode()).decode() if basic_auth else None

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            refused = expected is not None and self.headers.get("Authorization") != expected
            payload = b'{"error":"unauthorized"}' if refused else body
            self.send_response(401 if refused else status)
            self.send_header("Content-Type", "application/json" if refused else content_type)
            if refused:
                self.send_header("WWW-Authenticate", 'Basic realm="metrics"')
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
