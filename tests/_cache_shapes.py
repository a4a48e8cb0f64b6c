"""Request shapes and fixtures shared by the prompt-cache tests (agent, RAG, timestamps)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from latencykit.emulator import Emulator, PromptCache, TimingModel

MODEL = "claude-sonnet-5"  # minimum cacheable prefix: 1024 tokens
FAST = TimingModel(time_scale=0, output_tokens=4)


def agent_tools(n: int = 12, salt: str = "") -> list[dict[str, Any]]:
    """About 3k tokens of tool definitions (12 tools × ~1000 characters)."""
    return [
        {
            "name": f"tool_{i}",
            "description": f"{salt}Tool {i} looks things up in system {i}. " * 24,
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}},
        }
        for i in range(n)
    ]


def agent_system(salt: str = "") -> str:
    """About 2k tokens of static system prompt."""
    return salt + "You are a careful agent. Think, then call tools, then answer briefly. " * 115


def timestamp_system(i: int, salt: str = "") -> str:
    """A system prompt that embeds the current time near its start (a classic silent cache breaker)."""
    return f"{salt}Current time: 2026-01-01 10:{i // 60:02d}:{i % 60:02d}. " + agent_system()


def filler(tokens: int, word: str = "context") -> str:
    """Roughly ``tokens`` tokens of text."""
    return (word + " ") * (tokens * 4 // (len(word) + 1))


@pytest.fixture
def cemu() -> Iterator[Emulator]:
    """A fresh emulator with its own prompt cache and no delays (cache state isolated per test)."""
    with Emulator(timing=FAST, seed=3, cache_model=PromptCache()) as emulator:
        yield emulator
