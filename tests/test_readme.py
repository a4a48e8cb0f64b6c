"""The README's first Python snippet runs as written, against the emulator (the SDKs' own env vars point there)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from latencykit.emulator import Emulator

README = Path(__file__).resolve().parents[1] / "README.md"


def _first_python_block(text: str) -> str:
    match = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert match, "README.md has no ```python block"
    return match.group(1)


def test_readme_first_snippet_runs(emu: Emulator, tmp_path: Path) -> None:
    """Exactly the README's first snippet, in a fresh interpreter, prints TTFT/E2E and a summary with n."""
    script = tmp_path / "snippet.py"
    script.write_text(_first_python_block(README.read_text(encoding="utf-8")), encoding="utf-8")
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": emu.base_url,
        "ANTHROPIC_API_KEY": "emulated",
        "OPENAI_BASE_URL": emu.base_url + "/v1",
        "OPENAI_API_KEY": "emulated",
    }
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^TTFT \d+ ms, E2E \d+ ms", result.stdout, re.M), result.stdout
    assert "1 call: completed 1" in result.stdout and "metric" in result.stdout
