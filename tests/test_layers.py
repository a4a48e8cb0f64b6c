"""The package's layering holds (import-linter's contracts in pyproject.toml), and a layer reaching up breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")


def lint(root: Path, src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with ``root``'s pyproject.toml over the package under ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    assert LINT is not None, "lint-imports not found: import-linter is a test dependency (pip install -e '.[test]')"
    return subprocess.run([LINT, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_contracts_are_kept() -> None:
    """Every contract in pyproject.toml is kept by the code as it is."""
    out = lint(REPO, REPO / "src")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout
    assert "Layers:" in out.stdout and "independent" in out.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        ("providers/_tap.py", "from ..bench import _stats", "latencykit.providers is not allowed to import latencykit.bench"),
        ("core/_rank.py", "from ..telemetry import _sketch", "latencykit.core is not allowed to import latencykit.telemetry"),
        ("emulator/_text.py", "from ..providers import _tap", "latencykit.emulator is not allowed to import latencykit.providers"),
        ("semantic/_options.py", "from ..engines import _names", "latencykit.semantic is not allowed to import latencykit.engines"),
        ("providers/_calls.py", "from ..semantic import _transport", "latencykit.providers is not allowed to import latencykit.semantic"),
    ],
)
def test_an_upward_or_sideways_import_breaks_the_contracts(tmp_path: Path, module: str, line: str, broken: str) -> None:
    """A copy of the package with one import added against the layering fails, naming the import."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO / "src" / "latencykit", tmp_path / "src" / "latencykit", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "src" / "latencykit" / module
    target.write_text(target.read_text() + f"\n{line}  # added by the test\n")
    out = lint(tmp_path, tmp_path / "src")
    assert out.returncode != 0, out.stdout
    assert broken in out.stdout, out.stdout
