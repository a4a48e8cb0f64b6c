"""The package's layering holds (import-linter's contracts in pyproject.toml), a layer reaching up breaks it,
and no import circle is left among latencykit's modules (grimp, imports inside functions included)."""

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
    assert "Contracts: 6 kept, 0 broken." in out.stdout, out.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        ("providers/_tap.py", "from ..bench import _stats", "latencykit.providers is not allowed to import latencykit.bench"),
        ("core/_rank.py", "from ..telemetry import _sketch", "latencykit.core is not allowed to import latencykit.telemetry"),
        ("emulator/_text.py", "from ..providers import _tap", "latencykit.emulator is not allowed to import latencykit.providers"),
        ("semantic/_options.py", "from ..engines import _names", "latencykit.semantic is not allowed to import latencykit.engines"),
        ("providers/_calls.py", "from ..semantic import _transport", "latencykit.providers is not allowed to import latencykit.semantic"),
        ("bench/_cell.py", "from ..reports import _html", "latencykit.bench is not allowed to import latencykit.reports"),
        ("experiment/_run.py", "from ..reports import _exp_report", "latencykit.experiment is not allowed to import latencykit.reports"),
        ("bench/_compare.py", "from ..experiment import _claims", "latencykit.bench is not allowed to import latencykit.experiment"),
        ("fleet/_fleet.py", "from ..bench import _workers", "latencykit.fleet is not allowed to import latencykit.bench"),
        ("fleet/_clock.py", "from ..telemetry import _sketch", "latencykit.fleet is not allowed to import latencykit.telemetry"),
        ("engines/_kv.py", "from ..fleet import _clock", "latencykit.engines is not allowed to import latencykit.fleet"),
        ("engines/_doctor.py", "from .. import vllm", "latencykit.engines is not allowed to import latencykit.vllm"),
        ("bench/_cell.py", "from ..commands import _bench", "latencykit.bench is not allowed to import latencykit.commands"),
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


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module in grimp's import graph of latencykit."""
    import grimp

    graph = grimp.build_graph("latencykit")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan, recursive: the graph is ~150 modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_at_all() -> None:
    """No two latencykit modules import each other, directly or round a longer circle, counting imports inside
    functions (grimp reads every import statement, wherever it is)."""
    assert _cycles() == []


def test_a_lazy_import_inside_a_function_is_a_circle_too(tmp_path: Path) -> None:
    """The check sees function-level imports: a model importing its view inside a method is reported."""
    shutil.copytree(REPO / "src" / "latencykit", tmp_path / "latencykit", ignore=shutil.ignore_patterns("__pycache__"))
    cell = tmp_path / "latencykit" / "bench" / "_cell.py"
    cell.write_text(cell.read_text() + "\n\ndef _show(run):\n    from ..reports._report import print_report\n\n    print_report(run)\n")
    code = "import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); from test_layers import _cycles; print(_cycles())"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(Path(__file__).parent)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "latencykit.bench._cell" in out.stdout and "latencykit.reports._report" in out.stdout, out.stdout
