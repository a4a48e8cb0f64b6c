"""Docs and the example notebook say what a reader needs (#30): whole tables, true defaults, no references to
material the reader does not have, the CPU-only and offline installs, and a notebook committed with its outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _table_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    return blocks + ([current] if current else [])


def test_retries_table_is_whole() -> None:
    """The retried-failures table is one table (the 'Not retried' paragraph follows it, not splits it)."""
    text = (DOCS / "retries.md").read_text()
    table = next(b for b in _table_blocks(text) if any("`server_error`" in row for row in b))
    assert any("`ttft_deadline`" in row for row in table)
    assert text.index("Not retried:") > text.index("`ttft_deadline` |")


def test_emulator_docs_state_the_default_cache_and_the_vllm_cli() -> None:
    """Emulator() caches by default (PromptCache); the CLI's --vllm and --pressure are documented."""
    text = (DOCS / "emulator.md").read_text()
    assert "the default caches nothing" not in text and "`Emulator()` caches by default" in text
    assert "--vllm" in text and "--pressure" in text


def test_bench_and_self_hosted_docs_stand_on_their_own() -> None:
    """No 'source article' and no issue numbers: the reader gets the content instead."""
    for name in ("bench.md", "self-hosted.md"):
        text = (DOCS / name).read_text()
        assert "source article" not in text, name
        assert not re.search(r"\bissue #?\d+|(?<![\w&])#\d+\b", text), name


def test_semantic_docs_give_the_cpu_only_and_offline_install() -> None:
    """The CPU build of torch from PyTorch's index, and a local model path with HF_HUB_OFFLINE."""
    text = (DOCS / "semantic.md").read_text()
    assert "--index-url https://download.pytorch.org/whl/cpu" in text and "nvidia" in text
    assert "HF_HUB_OFFLINE=1" in text and "--local-dir" in text


def test_notebook_is_committed_with_its_outputs() -> None:
    """Readers see the tables and plots without running it: every code cell that shows something has outputs,
    the two plots among them, and nothing from the machine that ran it (paths, warnings)."""
    nb = json.loads((ROOT / "examples" / "notebook.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert sum(1 for o in outputs if "image/png" in o.get("data", {})) == 2
    assert sum(1 for o in outputs if "text/html" in o.get("data", {})) >= 2
    assert all(c.get("execution_count") for c in code if c.get("outputs"))
    assert not any(o.get("output_type") == "stream" and o.get("name") == "stderr" for o in outputs)
    text = json.dumps(outputs)
    assert "/tmp/" not in text and "/work/" not in text and "/home/" not in text
