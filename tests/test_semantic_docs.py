"""docs/semantic.md's runnable example runs as written against the emulator: the default embedder
answers the question asked again and misses the paraphrase (which needs a model embedder); the
async client does the same with the example's own questions."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import latencykit as lk
from latencykit.emulator import Emulator

DOC = Path(__file__).resolve().parents[1] / "docs" / "semantic.md"
MARK = "<!-- runnable example: tests/test_semantic_docs.py runs this block as written -->"


def example() -> str:
    """The Python block right after the runnable-example mark."""
    text = DOC.read_text(encoding="utf-8")
    assert MARK in text, "docs/semantic.md lost its runnable example mark"
    match = re.match(r"\s*```python\n(.*?)^```", text.split(MARK, 1)[1], re.S | re.M)
    assert match, "no ```python block right after the mark"
    return match.group(1)


def questions() -> list[str]:
    """The questions the example asks, in order."""
    return re.findall(r'^print\(ask\("(.*?)"\)\)', example(), re.M)


def test_docs_example_runs_as_written(emu: Emulator, tmp_path: Path) -> None:
    """Exactly the docs' block, in a fresh interpreter: miss, hit on the repeat, miss on the paraphrase."""
    script = tmp_path / "semantic_example.py"
    script.write_text(example(), encoding="utf-8")
    env = {**os.environ, "OPENAI_BASE_URL": emu.base_url + "/v1", "OPENAI_API_KEY": "emulated"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "False"], result.stdout
    assert questions() == ["What is your return policy?", "what is your return policy", "what's your return policy"]


async def test_docs_questions_with_the_async_client(emu: Emulator) -> None:
    """The example's questions through ``lk.AsyncOpenAI`` with the default cache: the same hits and misses."""
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="emulated", semantic=lk.SemanticCache())
    hits = []
    for q in questions():
        await client.chat.completions.create(
            model="gpt-4o-mini", max_tokens=64,
            messages=[{"role": "system", "content": "You answer for an online shop."}, {"role": "user", "content": q}],
            extra_headers=lk.semantic_cacheable(scope="shop"),
        )  # fmt: skip
        hits.append(bool(client.latency.last.semantic_hit))  # type: ignore[union-attr]
    await client.close()
    assert hits == [False, True, False]
