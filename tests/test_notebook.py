"""The example notebook runs top to bottom in a real kernel and shows percentiles and the cache hit rate as HTML."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "notebook.ipynb"


def _html_outputs(nb: nbformat.NotebookNode) -> list[str]:
    out = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                out.append(data["text/html"])
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jupyter_client/zmq internals on newer Pythons
def test_example_notebook_renders_summary_and_cache_report(tmp_path: Path) -> None:
    """Executing examples/notebook.ipynb yields HTML tables with P50/P99 latencies and a cache hit rate, and PNG plots."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    html = _html_outputs(nb)
    summary = next(h for h in html if "latencykit-summary" in h)
    assert "p50 ms" in summary and "p99 ms" in summary and "TTFT" in summary and "emulated" in summary
    report = next(h for h in html if "hit rate" in h.lower())
    assert "%" in report
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 2
