"""``mypy --strict`` over the package and the typed usage file (tests/typing_usage.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
# The repository's own (git-ignored) cache: a cold run reads both SDKs and takes ~20 s.
CACHE = ROOT / ".mypy_cache"


def _mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mypy", "--strict", "--config-file", str(CONFIG), "--cache-dir", str(CACHE)]
    return subprocess.run([*cmd, *map(str, paths)], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_mypy_strict_passes() -> None:
    """The package and the typed usage file pass ``mypy --strict``."""
    result = _mypy(ROOT / "src" / "latencykit", ROOT / "tests" / "typing_usage.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_catches_a_wrong_type(tmp_path: Path) -> None:
    """The check can fail: asserting that ``messages.create`` returns ``str`` is a mypy error."""
    wrong = tmp_path / "wrong_usage.py"
    wrong.write_text(
        "from typing_extensions import assert_type\n"
        "import latencykit as lk\n"
        "def f() -> None:\n"
        "    client = lk.Anthropic(api_key='key')\n"
        "    message = client.messages.create(\n"
        "        model='m', max_tokens=1, messages=[{'role': 'user', 'content': 'hi'}]\n"
        "    )\n"
        "    assert_type(message, str)\n"
    )
    result = _mypy(wrong)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Expression is of type "Message", not "str"' in result.stdout, result.stdout
