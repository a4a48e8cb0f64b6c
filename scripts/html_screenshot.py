#!/usr/bin/env python3
"""Render a bench HTML report in headless Chromium and check its plots.

    python scripts/html_screenshot.py REPORT.html OUT.png     # screenshot an existing report
    python scripts/html_screenshot.py --run OUT.png           # run a short emulated sweep first

Needs Chromium (Debian: ``apt-get install chromium``; .ci/run installs it). Checks, exiting 1 on
a failure: the PNG is written and not blank, every SVG tick label is a plain round number (no
``e+`` notation; steps of 1, 2, 2.5 or 5 × 10^k), and every legend entry sits outside its plot
area. tests/test_html_report.py runs it where Chromium is installed; look at the PNG to judge
the rest.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

SVG_NS = "{http://www.w3.org/2000/svg}"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str | None:
    """The first headless-capable Chromium on PATH, or ``None``."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def page_height(text: str) -> int:
    """A window tall enough for the whole report (headless Chromium screenshots the window only)."""
    heights = [int(float(h)) for h in re.findall(r'<svg[^>]*\bheight="([\d.]+)"', text)]
    return 800 + sum(h + 30 for h in heights) + 24 * text.count("<tr") + 40 * text.count("<p")


def screenshot(page: Path, png: Path, width: int = 1200, height: int | None = None, timeout: float = 120) -> None:
    """Render ``page`` with headless Chromium into ``png`` (``RuntimeError`` if it cannot)."""
    height = height or page_height(page.read_text())
    exe = browser()
    if exe is None:
        raise RuntimeError("no Chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={png}",
               page.resolve().as_uri()]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"Chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-500:]}")


def _round(value: float, step: float) -> bool:
    if step <= 0:
        return False
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5)) and abs(value / step - round(value / step)) < 1e-6


def svgs(page_text: str) -> list[ET.Element]:
    """The inline SVG elements of a report."""
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", page_text, flags=re.S)]


def check_ticks(svg: ET.Element) -> list[str]:
    """Problems with the tick labels of one SVG: e-notation, or values that are not round steps."""
    problems = []
    axes: dict[str, list[float]] = {}
    for t in svg.iter(f"{SVG_NS}text"):
        if t.get("class") != "tick":
            continue
        text = t.text or ""
        if re.search(r"\d[eE][+-]?\d", text):
            problems.append(f"tick {text!r} in e-notation")
            continue
        axis = "x" if t.get("text-anchor") == "middle" else "y"
        axes.setdefault(axis, []).append(float(text.replace(",", "")))
    for axis, values in axes.items():
        steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
        if len(steps) != 1 or not all(_round(v, next(iter(steps))) for v in values):
            problems.append(f"{axis} ticks {values} are not evenly spaced round numbers")
    return problems


def check_legends(svg: ET.Element) -> list[str]:
    """Problems with legends: an entry whose baseline lies inside the plot area."""
    plot = next((r for r in svg.iter(f"{SVG_NS}rect") if r.get("class") == "plot"), None)
    if plot is None:
        return []
    top = float(plot.get("y", 0))
    bottom = top + float(plot.get("height", 0))
    return [f"legend {t.text!r} inside the plot area" for t in svg.iter(f"{SVG_NS}text")
            if t.get("class") == "legend" and top <= float(t.get("y", 0)) <= bottom]  # fmt: skip


def check_png(png: Path) -> list[str]:
    """A PNG that is missing, tiny, or a single colour is a failure."""
    data = png.read_bytes() if png.is_file() else b""
    if len(data) < 2000 or not data.startswith(b"\x89PNG"):
        return [f"{png} is not a real screenshot ({len(data)} bytes)"]
    return []


def check(page: Path, png: Path) -> list[str]:
    """Every problem found with ``page`` and its screenshot ``png``."""
    text = page.read_text()
    charts = svgs(text)
    problems = [] if charts else ["no SVG charts in the report"]
    for svg in charts:
        problems += check_ticks(svg) + check_legends(svg)
    return problems + check_png(png)


def _run_report(png: Path) -> Path:
    """A short emulated sweep (two strategies, two load levels) with its HTML report beside ``png``."""
    page = png.with_suffix(".html")
    subprocess.run([sys.executable, "-m", "latencykit.cli", "bench", "--concurrency", "2,6", "--matrix", "cache=auto,off",
                    "--requests", "24", "--emu-time-scale", "0.2", "--no-exact-output", "--quiet",
                    "--out", str(png.with_suffix(".json")), "--html", str(page)], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return page


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="REPORT.html OUT.png, or OUT.png with --run")
    p.add_argument("--run", action="store_true", help="run a short emulated sweep to make the report first")
    args = p.parse_args(argv)
    if args.run:
        png = Path(args.paths[0])
        page = _run_report(png)
    else:
        page, png = Path(args.paths[0]), Path(args.paths[1])
    screenshot(page, png)
    problems = check(page, png)
    for line in problems:
        print(f"html_screenshot: {line}", file=sys.stderr)
    print(f"{png}: {png.stat().st_size} bytes, {len(svgs(page.read_text()))} charts, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
