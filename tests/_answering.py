"""A loopback HTTP server that answers every GET with one status and body: a server refusing a route
(llama-server's /metrics without ``--metrics``, /v1/models without a valid key), as its error reaches a user."""

from __future__ import annotations

import contextlib
import http.server
import threading
from typing import Any, Iterator


@contextlib.contextmanager
def answering(status: int, content_type: str, body: bytes) -> Iterator[str]:
    """Serve ``status`` / ``body`` to every GET on 127.0.0.1; yields the root URL; stopped on exit."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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
