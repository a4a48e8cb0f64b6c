"""Chat Completions: the chunk tap, the accumulator, and the observed ``chat.completions`` resources.

``chat.completions.create(stream=False)`` is sent as a stream and reassembled
(``ChatCompletionStreamState``) into the exact ``ChatCompletion``. Chat streams ask for
``stream_options.include_usage``; when the caller did not, the usage-only chunk is hidden —
except on a server that sends it unasked, which gets the caller's request as written
(`_usage_habit` learns which servers do). ``chat.completions.stream()`` and ``.parse()`` go
through the SDK's own helpers, which call the observed ``create``.
"""

from __future__ import annotations

import functools
import json
import types
import weakref
from functools import cached_property
from typing import Any, Optional

import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.resources.chat import AsyncChat, AsyncCompletions, Chat, Completions
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion

from ..core._errors import EndedEarly, PartialOutput
from ..core._record import CallRecord
from ..core._timing import REASONING_OPAQUE, REASONING_SUMMARY, REASONING_TEXT, CallTimer
from ..core._usage import apply_openai_chat_usage
from ._calls import given, raw_response_requested
from ._managers import wrap_async_manager, wrap_manager
from ._openai_call import OpenAIApi, acreate_call, aenter_helper, as_helper, create_call, enter_helper
from ._sse import fast_events, through
from ._tap import Tap
from ._usage_habit import HIDDEN, NOT_ASKED, UNASKED, UNVERIFIED, UsageProbe, habits_for, may_probe

__all__ = [
    "ChatTap", "ChatAccumulator", "CHAT", "ObservedCompletions", "AsyncObservedCompletions", "ObservedChat",
    "AsyncObservedChat", "observed_beta", "async_observed_beta", "chat_request", "chat_api", "on_completion",
    "completion_from_state",
]  # fmt: skip


_CHUNK = "chat.completion.chunk"


class ChatTap(Tap):
    """Marks chunks with content, refusal, reasoning or tool arguments; reads usage and finish.

    What ends a Chat Completions stream as complete, as the raw SDK sees it: a chunk with a
    ``finish_reason``, the usage-only chunk, or ``data: [DONE]`` (some OpenAI-compatible
    servers send no ``finish_reason`` at all). ``[DONE]`` never reaches the caller — the SDK
    stops there — so `opened` watches the SSE events for it. Objects that are not
    ``chat.completion.chunk`` (Azure's prompt-filter results, ``object: ""``) reach the
    caller as the raw SDK yields them, but give neither model, id nor the first token.
    With continuous usage stats (vLLM: usage on every chunk), a chunk whose ``completion_tokens``
    grew carries a token even when its text is empty (a partial UTF-8 character). A single
    usage at the end (DeepSeek, OpenRouter: on the finish chunk or on an empty-delta chunk
    after it) is no such evidence: its growth counts only when an earlier chunk of the stream
    carried usage and no choice had finished since the last token. A chunk with content,
    reasoning or tool arguments after a finish (another of ``n`` choices still streaming)
    takes the terminal back (`CallTimer.resume`), so E2E never ends before the last token.

    ``hide_usage``: the usage-only chunk is latencykit's (the caller did not ask) and is kept
    from the caller; ``usage_verified``: the server is known to send it only when asked;
    ``probe``: the request went without ``include_usage``, and the end of the stream tells
    whether the server sends that chunk unasked (`_usage_habit`).
    """

    __slots__ = (
        "hide_usage", "usage_verified", "probe", "_fresh", "_slow", "_generated", "_usage_read", "_ended_choices", "sse",
        "_usage_json",
    )  # fmt: skip
    connection_error = openai.APIConnectionError
    api_error = openai.APIError

    def __init__(self, timer: CallTimer, hide_usage: bool, probe: Optional[UsageProbe] = None, usage_verified: bool = False) -> None:
        super().__init__(timer)
        self.hide_usage = hide_usage
        self.usage_verified = usage_verified
        self.probe = probe
        self._fresh = True
        self._slow = True
        """Every chunk takes the full path: before the first chunk and after a finish."""
        self._generated = 0
        self._usage_read = False
        self._ended_choices: tuple[int, ...] = ()
        self.sse: Any = None
        """The SDK stream's SSE event generator, once its iterator started (see `watch_done`)."""
        self._usage_json: Optional[dict[str, Any]] = None
        """The usage of a usage-only chunk `take_usage_chunk` read, as its JSON (see `partial`)."""

    def new_attempt(self) -> None:
        """Forget the events of an abandoned attempt (and read the next one's model and id)."""
        super().new_attempt()
        self._fresh = self._slow = True
        self._generated = 0
        self._usage_read = False
        self._ended_choices = ()
        self.sse = None
        self._usage_json = None

    def opened(self, stream: Any) -> None:
        """Watch the SDK stream's SSE events for ``[DONE]`` (before anything iterates it).

        Where latencykit's usage-only chunk is to be hidden and `FastEvents` decodes the
        stream, its ``keep`` hook does it all on each event's data as the event goes to the SDK,
        before the SDK parses it into a chunk (`sse_data`); otherwise the SDK's event generator
        is wrapped (`watch_done`)."""
        hide = self.hide_usage
        if fast_events(stream, self.sse_data if hide else None) and hide:
            return
        watch_done(stream, self)

    def sse_data(self, event: Optional[str], data: str) -> Optional[str]:
        """Each SSE event's data while latencykit's usage chunk is hidden (`FastEvents`' ``keep``,
        else `_swallow`): ``None`` for that usage-only chunk, read here and dropped (the one with
        ``"choices":[]``: one substring test per event finds the candidates,
        `take_usage_chunk` decides); the data less its trailing ``"usage":null`` where it ends so
        (`_NULL_USAGE`), so that the chunk the caller gets is the one the raw SDK gives for the
        request they wrote (``usage`` unset: ``to_dict()`` and ``model_fields_set`` match) and
        the SDK builds one field less; ``[DONE]`` is watched on the way."""
        if data.endswith(_NULL_USAGE):
            return data[: data.rindex(",")] + "}"
        if "[]" in data:
            if event is None and '"usage"' in data and self.take_usage_chunk(data):
                return None
        elif data.startswith("[DONE]"):
            self.timer.terminal()
        return data

    def ended(self) -> None:
        """The SDK's chunks ran out: at ``[DONE]``, if that is where it stopped.

        The SDK breaks out of its loop over the SSE events at ``[DONE]``, leaving their
        generator suspended, and otherwise runs it to its end (a body cut short, or ended
        without ``[DONE]``): so its state says which, with nothing watched per event.
        """
        sse, self.sse = self.sse, None  # the generator may hold the stream: no cycle kept
        if sse is not None and (sse.ag_frame if isinstance(sse, types.AsyncGeneratorType) else sse.gi_frame) is not None:
            self.timer.terminal()
        probe = self.probe
        if probe is not None and self.timer.saw_terminal:  # a whole stream, and no usage-only chunk
            self.probe = None
            probe.saw(False)

    def take_usage_chunk(self, data: str) -> bool:
        """Read latencykit's own usage-only chunk (``data``: its SSE JSON) and say whether the
        SDK may be spared it: the caller did not ask for it and never sees it, so its counts
        are read here from the C JSON parser's dict (a few µs) instead of the SDK building a
        ``ChatCompletionChunk`` it would drop (~70 µs, 3-4 % of a short call). The SDK's
        ``CompletionUsage`` is built only if a `partial` output needs it (validating it on
        every call cost ~50 µs in place). Anything else (not a usage-only chunk) goes to the
        SDK and `__call__` as before."""
        try:
            chunk = json.loads(data)
        except ValueError:
            return False
        if not isinstance(chunk, dict) or chunk.get("choices") != [] or "error" in chunk:
            return False
        raw = chunk.get("usage")
        if not isinstance(raw, dict) or chunk.get("object", _CHUNK) != _CHUNK or _validate_usage is None:
            return False
        timer = self.timer
        rec = timer.record
        if self._fresh:
            self._fresh = False
            model, rid = chunk.get("model"), chunk.get("id")
            rec.response_model = model if isinstance(model, str) else None
            rec.response_id = rid if isinstance(rid, str) else None
        self.usage, self._usage_json = None, raw
        apply_openai_chat_usage(rec, raw)
        timer.event(False)
        timer.terminal()  # the usage-only chunk comes last, after every choice finished
        rec.extra["usage_chunk"] = HIDDEN if self.usage_verified else UNVERIFIED
        self.read_usage_chunk(chunk)
        return True

    def partial(self) -> PartialOutput:
        """`Tap.partial`, with the usage of a usage-only chunk read from its JSON built now."""
        raw, self._usage_json = self._usage_json, None
        if raw is not None and self.usage is None:
            try:
                self.usage = _validate_usage(raw)
            except Exception:  # as the SDK would have kept it: unvalidated
                self.usage = CompletionUsage.model_construct(**raw)
        return super().partial()

    def read_usage_chunk(self, chunk: dict[str, Any]) -> None:
        """Read what else a server put on the usage-only chunk that `take_usage_chunk` took
        (its JSON as a dict): nothing here; the self-hosted servers' taps read their extras."""

    def __call__(self, chunk: Any) -> bool:
        try:  # the commonest chunk first: one piece of text (anything else takes the full path below)
            if not self._slow and chunk.usage is None:
                choices = chunk.choices
                if choices and len(choices) == 1:
                    choice = choices[0]
                    content = choice.delta.content
                    if content and not choice.finish_reason and getattr(chunk, "object", _CHUNK) == _CHUNK:
                        self.texts.append(content)
                        self._stamp(self._now())
                        return True
        except AttributeError:  # not a chat chunk (no usage / choices): the full path reads it
            pass
        timer = self.timer
        if getattr(chunk, "object", _CHUNK) != _CHUNK:
            timer.event(False)
            return True
        rec = timer.record
        if self._fresh:
            self._fresh = False
            rec.response_model = chunk.model
            rec.response_id = chunk.id
        usage = chunk.usage
        choices = chunk.choices
        if usage is not None:
            self.usage = usage
            if not choices:
                apply_openai_chat_usage(rec, usage)
                timer.event(False)
                timer.terminal()  # the usage-only chunk comes last, after every choice finished
                probe = self.probe
                if probe is not None:  # nobody asked for it: the raw SDK shows it too
                    self.probe = None
                    probe.saw(True)
                    rec.extra["usage_chunk"] = UNASKED
                    return True
                if self.hide_usage:
                    rec.extra["usage_chunk"] = HIDDEN if self.usage_verified else UNVERIFIED
                    return False
                return True
        elif not choices:
            timer.event(False)
            return True
        token = False
        reasoning = 0
        finished = None
        for choice in choices:
            delta = choice.delta
            content = delta.content
            if content:
                self.texts.append(content)
                token = True
            elif delta.tool_calls:
                for call in delta.tool_calls:
                    args = call.function.arguments if call.function is not None else None
                    if args:
                        self.tool_input(f"{choice.index}:{call.index}").append(args)
                        token = True
            if not token:
                token = _delta_has_output(delta)
                if not token:
                    reasoning |= delta_reasoning(delta)
            if choice.finish_reason:
                finished = choice.finish_reason
        if usage is not None:
            generated = usage.completion_tokens
            if isinstance(generated, int):
                # The server's own count says what arrived, but only where it counts every
                # chunk (continuous usage: an earlier chunk carried usage) and the stream is
                # still generating: a stream's only usage, on its finish chunk or after it,
                # says nothing about which chunk carried the tokens.
                if generated > self._generated and self._usage_read and not timer.saw_terminal:
                    token = True
                self._generated = generated
            if self._usage_read and finished is None and usage.completion_tokens_details is None:
                # Mid-stream only the completion count moves (the prompt side is fixed once
                # read): one field per chunk instead of the whole usage.
                if isinstance(generated, int):
                    rec.output_tokens = generated
            else:
                self._usage_read = True
                apply_openai_chat_usage(rec, usage)
        if token or reasoning:
            if timer.saw_terminal:  # a choice finished, another still streams: not the end yet
                timer.resume()
            if token:
                timer.token()
            else:
                timer.reasoning(reasoning)
        else:
            timer.event(False)
        if finished is not None:
            for choice in choices:
                if choice.finish_reason and choice.index not in self._ended_choices:
                    # One reason per choice: OpenRouter repeats it on the usage chunk.
                    self._ended_choices = (*self._ended_choices, choice.index)
                    rec.finish_reasons = (*rec.finish_reasons, choice.finish_reason)
            timer.terminal()
        self._slow = timer.saw_terminal
        return True


class _DoneWatch:
    """Stands in for one SDK stream's ``_iter_events`` until the SDK calls it (once, when its
    iterator starts), then hands the tap the real SSE event generator, whose state at the
    end says whether the SDK stopped at ``[DONE]`` (`ChatTap.ended`). Where the SDK's
    events are no generator, it watches each one instead. Holds the stream weakly and
    removes itself, so it adds no reference cycle."""

    __slots__ = ("stream", "tap")

    def __init__(self, stream: Any, tap: "ChatTap") -> None:
        self.stream = weakref.ref(stream)
        self.tap = tap

    def __call__(self) -> Any:
        stream = self.stream()
        assert stream is not None  # the SDK calls this from the stream's own iterator
        stream.__dict__.pop("_iter_events", None)
        events = stream._iter_events()
        tap = self.tap
        if tap.hide_usage:  # latencykit's usage chunk: read here, never parsed by the SDK
            return _aswallow(events, tap) if hasattr(events, "__aiter__") else _swallow(events, tap)
        if isinstance(events, (types.GeneratorType, types.AsyncGeneratorType)):
            tap.sse = events
            return events
        timer = tap.timer
        return _adone(events, timer) if hasattr(events, "__aiter__") else _done(events, timer)


def watch_done(stream: Any, tap: "ChatTap") -> None:
    """Let ``tap`` see whether ``stream``'s SSE events ended at ``[DONE]``."""
    state = getattr(stream, "__dict__", None)
    if state is None or "_lk_watched" in state or not callable(getattr(type(stream), "_iter_events", None)):
        return
    state["_lk_watched"] = True
    state["_iter_events"] = _DoneWatch(stream, tap)


def _done(events: Any, timer: CallTimer) -> Any:
    for sse in events:
        if sse.data.startswith("[DONE]"):
            timer.terminal()
        yield sse


async def _adone(events: Any, timer: CallTimer) -> Any:
    async for sse in events:
        if sse.data.startswith("[DONE]"):
            timer.terminal()
        yield sse


_NULL_USAGE = (',"usage":null}', ', "usage": null}')
"""How a chunk ends where ``include_usage`` was asked for and the chunk carries no usage: OpenAI
(and the emulator after it) writes compact JSON with ``usage`` last; a server writing Python's
default JSON separators puts spaces in."""


def _swallow(events: Any, tap: ChatTap) -> Any:
    """The SSE events as the SDK would see them, less latencykit's usage-only chunk, through
    `ChatTap.sse_data` (where the stream's decoder is not `FastEvents`, which does this itself)."""
    keep = tap.sse_data
    for sse in events:
        if (sse := through(keep, sse)) is not None:
            yield sse


async def _aswallow(events: Any, tap: ChatTap) -> Any:
    """Async twin of `_swallow`."""
    keep = tap.sse_data
    async for sse in events:
        if (sse := through(keep, sse)) is not None:
            yield sse


_validate_usage: Any = getattr(CompletionUsage, "model_validate", None)
"""pydantic 2's validator of the SDK's usage model (``None`` under pydantic 1: the SDK parses the chunk)."""


def _delta_has_output(delta: Any) -> bool:
    """Whether a delta carries a token of the answer: text, a refusal, tool arguments."""
    if delta.content or delta.refusal:
        return True
    calls = delta.tool_calls
    if calls:
        for call in calls:
            fn = call.function
            if fn is not None and fn.arguments:
                return True
    return False


# OpenRouter's reasoning_details item types: the reasoning itself, a summary of it, or an
# encrypted blob standing for it (https://openrouter.ai/docs/use-cases/reasoning-tokens).
_DETAIL_KINDS = {"reasoning.text": REASONING_TEXT, "reasoning.summary": REASONING_SUMMARY, "reasoning.encrypted": REASONING_OPAQUE}


def delta_reasoning(delta: Any) -> int:
    """What reasoning a Chat delta carries (`core._timing` reasoning bits; 0 for none).

    OpenAI-compatible servers stream reasoning as an extra field: vLLM, llama.cpp and DeepSeek
    as ``reasoning_content`` or ``reasoning`` (text, token by token), OpenRouter and Snowflake as
    ``reasoning_details`` (a list of text, summary or encrypted items).
    """
    extra = delta.model_extra
    if not extra:
        return 0
    details = extra.get("reasoning_details")
    if not details:  # (where both come, the typed details say what the text field holds)
        return REASONING_TEXT if extra.get("reasoning_content") or extra.get("reasoning") else 0
    kinds = 0
    for item in details if isinstance(details, list) else (details,):
        kind = item.get("type") if isinstance(item, dict) else None
        kinds |= _DETAIL_KINDS.get(kind, REASONING_TEXT if isinstance(item, dict) and item.get("text") else REASONING_OPAQUE)  # type: ignore[arg-type]
    return kinds


def on_completion(rec: CallRecord, completion: Any) -> None:
    rec.response_model = getattr(completion, "model", None)
    rec.response_id = getattr(completion, "id", None)
    apply_openai_chat_usage(rec, getattr(completion, "usage", None))
    rec.finish_reasons = tuple(c.finish_reason for c in getattr(completion, "choices", []) if c.finish_reason)


def chat_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The streamed request, and whether the caller asked for the usage chunk itself.

    ``include_usage`` goes in the caller's ``stream_options`` where they gave some; otherwise
    in ``extra_body`` (the same JSON on the wire): the SDK copies that as it is, where a typed
    ``stream_options`` argument goes through its request transform, type hints and all
    (~1,000 bytecodes a call, a sixth of what latencykit adds to a short stream).
    """
    opts = kwargs.get("stream_options")
    if isinstance(opts, dict):
        return {**kwargs, "stream": True, "stream_options": {**opts, "include_usage": True}}, bool(opts.get("include_usage"))
    extra = kwargs.get("extra_body")
    if extra is None or not given(extra):
        extra = {}
    elif not isinstance(extra, dict):  # something the SDK merges its own way: the typed argument
        return {**kwargs, "stream": True, "stream_options": {"include_usage": True}}, False
    inner = extra.get("stream_options")
    inner = inner if isinstance(inner, dict) else {}
    body = {**extra, "stream_options": {**inner, "include_usage": True}}
    return {**kwargs, "stream": True, "extra_body": body}, bool(inner.get("include_usage"))


def completion_from_state(state: ChatCompletionStreamState[Any], extras: Optional[dict[str, Any]] = None) -> ChatCompletion:
    """The plain ``ChatCompletion`` a non-streaming call returns, from the SDK's stream state.

    The SDK's snapshot adds parse-only fields (``parsed``, ``parsed_arguments``) that a
    non-streaming ``ChatCompletion`` does not have; the API's non-streaming message always
    carries ``annotations`` (``[]`` when none), which deltas never send; tool-call deltas
    carry an ``index`` the final message does not.
    """
    # The snapshot, not get_final_completion(): that one parses, and raises on finish_reason
    # "length" / "content_filter", which a plain create() must return, not raise.
    data: dict[str, Any] = state.current_completion_snapshot.to_dict()
    if extras:
        data.update(extras)
    for choice in data.get("choices", []):
        message = choice.get("message", {})
        message.pop("parsed", None)
        if message.get("annotations") is None:
            message["annotations"] = []
        for key in ("audio", "function_call", "tool_calls"):
            if key in message and message[key] is None:
                del message[key]  # absent, not null, in a non-streaming message
        for call in message.get("tool_calls") or []:
            call.pop("index", None)  # a delta-only field
            fn = call.get("function")
            if isinstance(fn, dict):
                fn.pop("parsed_arguments", None)
    return ChatCompletion.construct(**data)


class ChatAccumulator:
    """Folds chunks into the ``ChatCompletion`` a non-streaming call returns (SDK stream state).

    Like the SDK's own helper, objects that are not ``chat.completion.chunk`` (Azure's
    prompt-filter results) are skipped, and a server extra on the first chunk keeps the first
    chunk's value (the Hugging Face router's ``sla_metrics``, on every chunk) as in the SDK's
    final completion. Extras the first chunk lacks (llama.cpp's ``timings`` on the usage
    chunk) are added from later chunks, where a non-streaming response has them.
    """

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(
            input_tools=kwargs.get("tools", openai.omit), response_format=kwargs.get("response_format", openai.omit)
        )
        self._fed = False
        self._first: frozenset[str] = frozenset()
        """The extras of the first chunk (the SDK's snapshot keeps their values)."""
        self._extras: dict[str, Any] = {}

    def feed(self, chunk: Any) -> None:
        """Accumulate one chunk."""
        if getattr(chunk, "object", _CHUNK) != _CHUNK:
            return
        self._state.handle_chunk(chunk)
        extra = chunk.model_extra
        if self._fed:
            if extra:
                first = self._first
                self._extras.update((k, v) for k, v in extra.items() if v is not None and k not in first)
        else:
            self._first = frozenset(extra or ())
        self._fed = True

    def snapshot(self) -> Optional[ChatCompletion]:
        """The completion so far, or ``None`` before the first chunk."""
        return completion_from_state(self._state, self._extras) if self._fed else None

    def result(self, complete: bool) -> ChatCompletion:
        """The reassembled completion; raises if the stream was cut short."""
        partial = self.snapshot()
        if partial is None or not complete:
            raise EndedEarly("the stream ended before the final chunk", partial)
        return partial


CHAT = OpenAIApi(
    "chat.completions",
    chat_request,
    lambda timer, hide: ChatTap(timer, hide_usage=hide),
    ChatAccumulator,
    on_completion,
    lambda client: client.chat.completions,
)
"""Chat Completions as latencykit always plans it: ``include_usage`` added, its chunk hidden."""


class _UsagePlan:
    """One Chat call's request and tap, planned by what its server does with the usage-only
    chunk when nobody asks (`_usage_habit`). The caller who asked, or a call that is not
    streamed to the caller, is planned as `CHAT` plans it."""

    __slots__ = ("habits", "url", "host", "mode")

    def __init__(self, client: Any) -> None:
        self.habits = habits_for(client._lk.recorder)
        base = client.base_url
        self.url = str(base)
        self.host = str(base.host)
        self.mode: Optional[str] = None

    def request(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        opts = kwargs.get("stream_options")
        caller_opts = opts if isinstance(opts, dict) else {}
        if caller_opts.get("include_usage") or not (given(kwargs.get("stream")) and kwargs["stream"]):
            return chat_request(kwargs)
        sends = self.habits.sends_unasked(self.url, self.host)
        if sends is False:
            self.mode = HIDDEN
        elif sends or (may_probe(self.host, caller_opts) and self.habits.start_probe(self.url)):
            # The server sends the usage unasked, or this call finds out whether it does: the
            # request goes as the caller wrote it.
            self.mode = NOT_ASKED
            return {**kwargs, "stream": True}, False
        else:
            self.mode = UNVERIFIED
        return chat_request(kwargs)

    def tap(self, timer: CallTimer, hide: bool) -> ChatTap:
        mode = self.mode
        if not hide or mode is None:
            return ChatTap(timer, hide)
        if mode == NOT_ASKED:
            timer.record.extra["usage_chunk"] = NOT_ASKED
            return ChatTap(timer, False, probe=UsageProbe(self.habits, self.url))
        return ChatTap(timer, True, usage_verified=mode == HIDDEN)


def chat_api(client: Any) -> OpenAIApi:
    """Chat Completions for one call of ``client``: `CHAT`, but knowing whether the client's
    server sends the usage-only chunk unasked."""
    plan = _UsagePlan(client)
    return OpenAIApi(CHAT.name, plan.request, plan.tap, ChatAccumulator, on_completion, CHAT.target)


class ObservedCompletions(Completions):
    """``client.chat.completions`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        return create_call(chat_api(self._client), self, Completions.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_manager(super().stream(**kwargs), enter_helper)

    def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().parse(**kwargs)
        with self.stream(**as_helper(kwargs, "chat.completions.parse")) as stream:
            return stream.get_final_completion()


class AsyncObservedCompletions(AsyncCompletions):
    """Async ``client.chat.completions`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().create(**kwargs)
        return await acreate_call(chat_api(self._client), self, AsyncCompletions.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_async_manager(super().stream(**kwargs), aenter_helper)

    async def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().parse(**kwargs)
        async with self.stream(**as_helper(kwargs, "chat.completions.parse")) as stream:
            return await stream.get_final_completion()


class ObservedChat(Chat):
    @cached_property
    def completions(self) -> Completions:
        """The observed Chat Completions resource."""
        return ObservedCompletions(self._client)


class AsyncObservedChat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        """The observed async Chat Completions resource."""
        return AsyncObservedCompletions(self._client)


@functools.lru_cache(maxsize=None)
def _beta_classes() -> tuple[type, type]:
    """``client.beta`` with an observed ``chat``, sync and async, made on first use: importing
    ``openai.resources.beta`` loads the Assistants and Threads resources and their types
    (about a sixth of the SDK), which an app that never touches ``client.beta`` does not pay."""
    from openai.resources.beta import AsyncBeta, Beta

    class ObservedBeta(Beta):
        @cached_property
        def chat(self) -> Chat:
            """The observed Chat resource (``client.beta.chat`` is the same API)."""
            return ObservedChat(self._client)

    class AsyncObservedBeta(AsyncBeta):
        @cached_property
        def chat(self) -> AsyncChat:
            """The observed async Chat resource."""
            return AsyncObservedChat(self._client)

    return ObservedBeta, AsyncObservedBeta


def observed_beta(client: Any) -> Any:
    """The ``beta`` resource of a latencykit ``OpenAI`` client."""
    return _beta_classes()[0](client)


def async_observed_beta(client: Any) -> Any:
    """The ``beta`` resource of a latencykit ``AsyncOpenAI`` client."""
    return _beta_classes()[1](client)
