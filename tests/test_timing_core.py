"""Unit tests of the sans-I/O timing state machine with an injected clock."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from latencykit import CallRecord, CallTimer
from latencykit.core._usage import apply_anthropic_usage, apply_openai_chat_usage, apply_openai_responses_usage


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _timer(clock: FakeClock) -> tuple[CallTimer, list[CallRecord]]:
    sink: list[CallRecord] = []
    return CallTimer(CallRecord(provider="anthropic", operation="chat", request_model="m"), clock=clock, sink=sink.append), sink


def test_ttft_tpot_e2e_follow_the_definitions() -> None:
    """TTFB at the first event, TTFT at the first token, TPOT from usage tokens, E2E at the terminal event."""
    clock = FakeClock()
    timer, sink = _timer(clock)
    clock.now += 0.05
    timer.event(False)  # message_start
    clock.now += 0.25
    timer.event(True)  # first token at 0.30
    for _ in range(9):
        clock.now += 0.02
        timer.event(True)  # last token at 0.48
    timer.record.output_tokens = 10
    clock.now += 0.01
    timer.event(False)
    timer.terminal()  # at 0.49
    clock.now += 5.0  # the caller dawdles before exhausting the iterator
    timer.exhausted()
    rec = sink[0]
    assert rec.ttfb == pytest.approx(0.05) and rec.ttft == pytest.approx(0.30)
    assert rec.tpot == pytest.approx(0.02) and rec.e2e == pytest.approx(0.49)
    assert rec.chunks == 10 and rec.chunk_gap_mean == pytest.approx(0.02) and rec.chunk_gap_max == pytest.approx(0.02)
    assert rec.outcome == "completed"


def test_tpot_undefined_below_two_tokens() -> None:
    """TPOT is None with one output token."""
    clock = FakeClock()
    timer, sink = _timer(clock)
    clock.now += 0.1
    timer.event(True)
    timer.record.output_tokens = 1
    timer.terminal()
    timer.exhausted()
    assert sink[0].tpot is None and sink[0].ttft == pytest.approx(0.1)


def test_finalizes_exactly_once_whatever_comes_next() -> None:
    """After the first exit, later exits (close, GC, errors) change nothing."""
    clock = FakeClock()
    timer, sink = _timer(clock)
    timer.event(True)
    clock.now += 1
    timer.abandon()
    timer.exhausted()
    timer.fail(RuntimeError("late"))
    timer.abandon()
    assert len(sink) == 1 and sink[0].outcome == "abandoned" and sink[0].e2e == pytest.approx(1)


@pytest.mark.parametrize(
    ("token_first", "exc", "outcome", "error_type"),
    [
        (False, RuntimeError("x"), "error", "RuntimeError"),
        (True, RuntimeError("x"), "interrupted", "RuntimeError"),
        (True, asyncio.CancelledError(), "abandoned", None),
        (False, KeyboardInterrupt(), "abandoned", None),
    ],
)
def test_outcome_of_failures(token_first: bool, exc: BaseException, outcome: str, error_type: str | None) -> None:
    """Errors before content are `error`, after content `interrupted`; cancellations are `abandoned`."""
    clock = FakeClock()
    timer, sink = _timer(clock)
    timer.event(token_first)
    timer.fail(exc)
    assert sink[0].outcome == outcome and sink[0].error_type == error_type


def test_stream_ending_without_terminal_event_is_interrupted() -> None:
    """An iterator that ends without message_stop / [DONE] after content is a truncation, not a success."""
    clock = FakeClock()
    timer, sink = _timer(clock)
    timer.event(True)
    timer.exhausted()
    assert sink[0].outcome == "interrupted" and sink[0].error_type == "IncompleteStreamError"


def test_sink_failure_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """A failing sink never breaks the call."""

    def bad_sink(rec: CallRecord) -> None:
        raise RuntimeError("sink down")

    timer = CallTimer(CallRecord(provider="p", operation="chat", request_model=None), clock=FakeClock(), sink=bad_sink)
    timer.complete()
    assert "failed to finalize" in caplog.text


def test_anthropic_usage_is_additive_and_cumulative() -> None:
    """Anthropic input = uncached + cache write + cache read; message_delta values overwrite, missing ones keep."""
    rec = CallRecord(provider="anthropic", operation="chat", request_model=None)
    apply_anthropic_usage(rec, SimpleNamespace(input_tokens=20, cache_creation_input_tokens=3068, cache_read_input_tokens=0, output_tokens=1))
    apply_anthropic_usage(rec, SimpleNamespace(input_tokens=None, cache_creation_input_tokens=3337, cache_read_input_tokens=6289, output_tokens=412))
    assert (rec.input_tokens, rec.cache_write_tokens, rec.cache_read_tokens, rec.output_tokens) == (20 + 3337 + 6289, 3337, 6289, 412)
    assert rec.cache_hit_ratio == pytest.approx(6289 / (20 + 3337 + 6289))


def test_usage_fields_the_sdk_does_not_model_are_read_on_every_call() -> None:
    """A pydantic model that lacks a field reads it from its extras, call after call; a property
    of that name on the class is read, and a field absent everywhere is None (all remembered per class)."""
    import pydantic

    class Usage(pydantic.BaseModel, extra="allow"):
        input_tokens: int = 0

        @property
        def cache_read_input_tokens(self) -> int:
            return 7

    for k in range(3):
        rec = CallRecord(provider="anthropic", operation="chat", request_model=None)
        usage = Usage.model_validate({"input_tokens": 5, "cache_creation_input_tokens": 10 + k})
        apply_anthropic_usage(rec, usage)
        assert (rec.cache_write_tokens, rec.cache_read_tokens, rec.output_tokens) == (10 + k, 7, None)
        assert rec.input_tokens == 5 + 10 + k + 7


class _SlottedUsage:
    """A usage object without a ``__dict__`` (read by attribute)."""

    __slots__ = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens", "cache_creation")

    def __init__(self, **kw: object) -> None:
        for name in self.__slots__:
            setattr(self, name, kw.get(name))


_USAGE = {"input_tokens": 20, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000, "output_tokens": 50,
          "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}}  # fmt: skip


@pytest.mark.parametrize("form", ["sdk model", "dict", "namespace", "slots"])
def test_anthropic_usage_reads_alike_in_every_form(form: str) -> None:
    """The SDK's Usage, its JSON as a dict, a plain object and one without a ``__dict__`` give one record."""
    from anthropic.types import Usage

    usage: object = {
        "sdk model": lambda: Usage.model_validate(_USAGE),
        "dict": lambda: dict(_USAGE),
        "namespace": lambda: SimpleNamespace(**_USAGE),
        "slots": lambda: _SlottedUsage(**_USAGE),
    }[form]()
    rec = CallRecord(provider="anthropic", operation="chat", request_model=None)
    apply_anthropic_usage(rec, usage)
    assert (rec.input_tokens, rec.uncached_input_tokens, rec.cache_write_tokens, rec.cache_read_tokens, rec.output_tokens) == (
        4320, 20, 300, 4000, 50)  # fmt: skip
    assert rec.extra["cache_write_1h_tokens"] == 200
    assert rec.reasoning_tokens is None


def test_anthropic_usage_iterations_sent_as_extras_are_summed() -> None:
    """``iterations`` on an SDK that does not model it arrives among the extras and still counts."""
    from anthropic.types import MessageDeltaUsage

    usage = MessageDeltaUsage.model_validate({**_USAGE, "iterations": [
        {"input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 3},
        {"input_tokens": 1, "cache_read_input_tokens": 2, "output_tokens": 4},
    ]})  # fmt: skip
    rec = CallRecord(provider="anthropic", operation="chat", request_model=None)
    apply_anthropic_usage(rec, usage)
    assert (rec.uncached_input_tokens, rec.cache_read_tokens, rec.output_tokens) == (6, 9, 7)
    assert rec.extra["usage_iterations"] == 2


def test_openai_usage_is_a_subset() -> None:
    """OpenAI prompt_tokens already include cached_tokens; a missing details object means not reported."""
    rec = CallRecord(provider="openai", operation="chat", request_model=None)
    apply_openai_chat_usage(rec, SimpleNamespace(prompt_tokens=1149, completion_tokens=353, prompt_tokens_details=SimpleNamespace(cached_tokens=1024), completion_tokens_details=None))
    assert (rec.input_tokens, rec.cache_read_tokens, rec.output_tokens) == (1149, 1024, 353)
    rec2 = CallRecord(provider="openai", operation="chat", request_model=None)
    apply_openai_chat_usage(rec2, SimpleNamespace(prompt_tokens=12, completion_tokens=5, prompt_tokens_details=None, completion_tokens_details=None))
    assert rec2.cache_read_tokens is None and rec2.cache_hit_ratio is None
    rec3 = CallRecord(provider="openai", operation="chat", request_model=None)
    apply_openai_responses_usage(rec3, SimpleNamespace(input_tokens=9463, output_tokens=600, input_tokens_details=SimpleNamespace(cached_tokens=8320, cache_write_tokens=0), output_tokens_details=SimpleNamespace(reasoning_tokens=512)))
    assert (rec3.input_tokens, rec3.cache_read_tokens, rec3.reasoning_tokens) == (9463, 8320, 512)


def test_a_failing_tap_never_breaks_the_stream(caplog: pytest.LogCaptureFixture) -> None:
    """An event the tap cannot read is passed to the caller anyway and logged once."""
    from latencykit.providers._streams import _tapped
    from latencykit.providers.anthropic import AnthropicTap

    clock = FakeClock()
    timer, _ = _timer(clock)
    tap = AnthropicTap(timer)
    odd = SimpleNamespace(type="content_block_delta")  # no .delta: not what the SDK produces
    assert _tapped(tap, odd) is True and _tapped(tap, odd) is True
    assert caplog.text.count("could not read") == 1 and timer.record.extra["tap_failed"] is True


def test_server_cache_diagnostics_are_recorded_beside_ours() -> None:
    """Anthropic's cache-diagnostics verdict on message_start lands in server_cache_miss_reason."""
    from anthropic._models import construct_type
    from anthropic.types import RawMessageStreamEvent

    from latencykit.providers.anthropic import AnthropicTap

    def start(diagnostics: object) -> object:
        message = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1},
            "diagnostics": diagnostics,
        }  # fmt: skip
        return construct_type(type_=RawMessageStreamEvent, value={"type": "message_start", "message": message})

    for diagnostics, expected in (
        ({"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 1200}}, "system_changed"),
        ({"cache_miss_reason": None}, "pending"),
    ):
        timer, _ = _timer(FakeClock())
        AnthropicTap(timer)(start(diagnostics))
        assert timer.record.server_cache_miss_reason == expected
    assert timer.record.extra.get("server_cache_missed_input_tokens") is None


@pytest.mark.parametrize("first_event_is_a_token", [True, False])
def test_token_is_event_true(first_event_is_a_token: bool) -> None:
    """The token fast path (`token()`) times a stream exactly as `event(True)` does."""
    records = []
    for fast in (False, True):
        clock = FakeClock()
        timer, sink = _timer(clock)
        if not first_event_is_a_token:
            clock.now += 0.03
            timer.event(False)
        for k in range(6):
            clock.now += 0.1 + 0.01 * k
            timer.token() if fast else timer.event(True)
        timer.record.output_tokens = 6
        timer.terminal()
        timer.exhausted()
        records.append((sink[0].ttfb, sink[0].ttft, sink[0].tpot, sink[0].chunks, sink[0].chunk_gap_max))
    assert records[0] == records[1]
    assert records[0][1] == pytest.approx(0.10 if first_event_is_a_token else 0.13)
