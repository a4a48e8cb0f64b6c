"""Provider error bodies, shaped like the real APIs so the SDKs raise their own exception classes."""

from __future__ import annotations

from typing import Any

__all__ = ["BadRequest", "anthropic_error", "openai_error"]

_ANTHROPIC: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Billing error"),
    403: ("permission_error", "Permission denied"),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Rate limited"),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}

_OPENAI: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Permission denied"),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    503: ("server_error", None, "The server is overloaded or not ready yet."),
}


class BadRequest(Exception):
    """A request the real API would reject with 400; the message names the bad field.

    ``param`` / ``code`` fill OpenAI's error fields of the same names (Anthropic has none).
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def anthropic_error(status: int, message: str | None = None, request_id: str | None = None) -> dict[str, Any]:
    """`{"type":"error","error":{...}}` with the error type Anthropic uses for `status`."""
    kind, default = _ANTHROPIC.get(status, ("api_error" if status >= 500 else "invalid_request_error", "Error"))
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message or default}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def openai_error(status: int, message: str | None = None) -> dict[str, Any]:
    """`{"error":{"message","type","param","code"}}` as OpenAI returns for `status`."""
    kind, code, default = _OPENAI.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, "Error")
    )
    return {"error": {"message": message or default, "type": kind, "param": None, "code": code}}
