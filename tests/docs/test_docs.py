"""The documentation is true: every ``python`` code block of the README and of the documentation pages runs
(each page's blocks in order, in one namespace, in a fresh interpreter in an empty folder), and the site
builds with Sphinx with warnings as errors, running the examples gallery (what ``make docs`` does).

A block that is not meant to run is written with another language (``console``, ``text``, ``ini``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n"
                   r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
GENERATED = ("_build", "auto_examples", "api/generated", "results")


def pages() -> list[str]:
    docs = ROOT / "docs"
    found = [p for p in docs.rglob("*.md") if not any(part in p.relative_to(docs).as_posix() for part in GENERATED)]
    return ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in found)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each fenced block whose language is python."""
    out = []
    for match in FENCE.finditer(text):
        if match.group("info").strip().split(" ")[0] in ("python", "py", "{code-block} python"):
            line = text.count("\n", 0, match.start("body")) + 1
            out.append((line, textwrap.dedent(match.group("body"))))
    return out


RUNNER = r'''
import json, sys, traceback
page, blocks = sys.argv[1], json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for line, code in blocks:
    try:
        exec(compile(code, f"{page}, block at line {line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"{page}: the block at line {line} failed")
'''


def test_blocks_are_found():
    blocks = python_blocks("text\n\n```python\nx = 1\n```\n\n  ```console\n  $ ls\n  ```\n\n"
                           "- item\n\n  ```python\n  y = 2\n  ```\n")
    assert blocks == [(4, "x = 1\n"), (14, "y = 2\n")]


@pytest.mark.parametrize("page", pages())
def test_every_python_block_runs(page, tmp_path):
    blocks = python_blocks((ROOT / page).read_text())
    if not blocks:
        return
    env = dict(os.environ, MPLBACKEND="Agg", OMP_WAIT_POLICY="passive")
    timeout = 900
    try:
        proc = subprocess.run([sys.executable, "-c", RUNNER, page], input=json.dumps(blocks), cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{page}: its code blocks timed out after {timeout} s")
    assert proc.returncode == 0, f"{proc.stderr[-4000:]}"


@pytest.mark.long
def test_site_builds_without_warnings(tmp_path):
    """What make docs runs, from scratch (-E): any Sphinx, docutils or numpydoc warning fails, and so does an
    example of the gallery that raises."""
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", "-d",
           str(tmp_path / "doctrees"), str(ROOT / "docs"), str(out)]
    env = dict(os.environ, MPLBACKEND="Agg", OMP_WAIT_POLICY="passive")
    timeout = 1800
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the documentation build timed out after {timeout} s")
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert "lightgbm-cegb" in (out / "index.html").read_text()
    api = (out / "api" / "generated" / "lightgbm_cegb.prediction_cost.html").read_text()
    assert "Parameters" in api and "Returns" in api
    gallery = sorted((out / "_images").glob("sphx_glr_plot_*_001.png"))
    assert len(gallery) >= 5, f"the gallery's figures: {[p.name for p in gallery]}"


def test_readme_links_resolve():
    """The README is read on its own (on a forge, in the sdist): every relative link and image names a file or
    folder of the repository."""
    text = (ROOT / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert targets, "no links found"
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


#: RESULTS.md tables that summarise several reports (ADAPT's) or quote published figures (AFABench's curve) rather
#: than copy one report (their first row, the header)
SUMMARY_TABLES = ("| task | f0 (test accuracy at cost) |", "| AFABench method (read from their figure) |")


def markdown_tables(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each table: a run of lines that start with ``|``."""
    tables, start, rows = [], 0, []
    for number, line in enumerate(text.split("\n") + [""], 1):
        if line.startswith("|"):
            start = start if rows else number
            rows.append(line)
        elif rows:
            tables.append((start, "\n".join(rows)))
            rows = []
    return tables


def test_results_tables_are_the_scripts_reports():
    """Every table of docs/RESULTS.md is copied, cell for cell, from a report a script wrote in docs/results/ (the
    command of each report is on its first lines): a table edited by hand, or a report re-run without the page, fails
    here."""
    reports = [p.read_text() for p in sorted((ROOT / "docs" / "results").glob("*.md"))]
    tables = markdown_tables((ROOT / "docs" / "RESULTS.md").read_text())
    assert len(tables) >= 10, f"found {len(tables)} tables in RESULTS.md"
    copied = [(line, table) for line, table in tables if not table.startswith(SUMMARY_TABLES)]
    assert len(copied) == len(tables) - len(SUMMARY_TABLES)
    differ = [f"RESULTS.md line {line}: {table.splitlines()[0][:80]}" for line, table in copied
              if not any(table in report for report in reports)]
    assert not differ, "tables found in no report of docs/results:\n" + "\n".join(differ)
