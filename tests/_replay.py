"""A local HTTP server that answers every POST with a given body: recorded or synthetic wire shapes.

The emulator produces the shapes it has knobs for; this serves byte-exact recorded real
responses (``tests/fixtures/recorded/``) and hand-written variants of them, so the real
SDKs parse them over real HTTP as they would the original server's answer.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

RECORDED = Path(__file__).resolve().parent / "fixtures" / "recorded"  # provenance: fixtures/README.md

SSE = "text/event-stream; charset=utf-8"


@dataclass
class Answer:
    """One canned HTTP answer."""

    body: bytes
    content_type: str = SSE
    status: int = 200


@dataclass
class Replay:
    """Serves ``answer`` to every POST; ``requests`` keeps the JSON bodies received."""

    answer: Answer = field(default_factory=lambda: Answer(b""))
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: Optional[ThreadingHTTPServer] = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def serve(self, body: bytes | str, content_type: str = SSE, status: int = 200) -> "Replay":
        """Answer the next requests with ``body``."""
        self.answer = Answer(body.encode() if isinstance(body, str) else body, content_type, status)
        self.requests.clear()
        return self

    def __enter__(self) -> "Replay":
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    replay.requests.append(json.loads(raw or b"{}"))
                except ValueError:
                    replay.requests.append({})
                answer = replay.answer
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def recorded_body(name: str) -> str:
    """The raw response body of a recorded ``*.yaml`` exchange (or the text of a ``*.txt`` recording)."""
    path = RECORDED / name
    if path.suffix == ".yaml":
        return str(yaml.safe_load(path.read_text())["response_body"])
    return path.read_text()


def sse_events(lines: Iterator[dict[str, Any] | str] | list[dict[str, Any] | str], named: bool = False) -> str:
    """An SSE body from JSON payloads (``"[DONE]"`` kept as is); ``named`` adds ``event:`` lines."""
    out = []
    for item in lines:
        data = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
        head = f"event: {item['type']}\n" if named and isinstance(item, dict) and "type" in item else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out)
