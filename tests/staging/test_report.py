"""`stageflow report`: the HTML page explaining a compile, from `ConcreteFunction.report`,
the command line and ``STAGEFLOW_REPORT_DIR`` (staged functions, staged gradients, saved
functions loaded, AOT libraries), and its rendering in headless Chromium.

The browser test installs Chromium (Debian's package) where it is missing, saying so on the
terminal, and fails where it cannot; only ``STAGEFLOW_NO_BROWSER=1``, typed by whoever runs
the suite, skips it, and the skip is listed in the summary (see `chromium` in conftest.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stageflow as sf
from stageflow.cli import main
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.passes.fuse import fusion_notes
from stageflow.passes.pipeline import Pipeline
from stageflow.staging.report import SECTIONS
from stageflow.testing.cli_inputs import PageMarkup, report_of

# The MLP page (a module fixture) is built once, in one process of the run.
pytestmark = pytest.mark.xdist_group("report")

ROOT = Path(__file__).resolve().parents[2]


def mlp_step():
    """The MLP training step of the benchmarks (784-256-256-10, SGD), batch 16."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.mlp_train import init_params, make_data, make_train_step
    finally:
        sys.path.remove(str(ROOT))
    params = [sf.Variable(p) for p in init_params()]
    step = make_train_step(params, staged=True)
    x, y = (sf.constant(a) for a in make_data(16))
    step(x, y)
    return step, (x, y)


@pytest.fixture(scope="module")
def mlp_page(tmp_path_factory):
    step, args = mlp_step()
    path = tmp_path_factory.mktemp("report") / "mlp.html"
    page = step.get_concrete_function(*args).report(str(path))
    assert path.read_text() == page
    return path, page


def diffs(page: str) -> dict[str, str]:
    """Each pass's diff block (the text between its summary and the end of its details)."""
    found = {}
    for match in re.finditer(r"after <b>([a-z-]+)</b> \(diff[^<]*</summary><pre>(.*?)</pre>",
                             page, re.S):
        found[match.group(1)] = match.group(2)
    return found


def test_the_mlp_report_has_every_section_and_stays_small(mlp_page):
    _, page = mlp_page
    for key, title in SECTIONS:
        assert f'<section id="{key}"><h2>{title}</h2>' in page
    assert len(page.encode()) < 2 * 2**20
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_every_pass_that_changed_the_module_shows_a_non_empty_diff(mlp_page):
    _, page = mlp_page
    changed = diffs(page)
    unchanged = re.findall(r"after <b>([a-z-]+)</b>: no change", page)
    assert set(changed) | set(unchanged) >= set(Pipeline.parse(DEFAULT_PIPELINE).names)
    assert {"fuse", "plan-buffers"} <= set(changed)
    for name, text in changed.items():
        assert 'class="add"' in text or 'class="del"' in text, name


def test_every_kernel_is_listed_with_its_fusion_notes(mlp_page):
    _, page = mlp_page
    kernels = set(re.findall(r'<h3 id="kernel-([\w]+)">', page))
    optimized = set(re.findall(r"func.func @(train_step_kernel\d+)", page))
    assert kernels and kernels == optimized
    for kernel in kernels:
        section = page.split(f'<h3 id="kernel-{kernel}">')[1].split("<h3")[0]
        assert "<th>not fused</th>" in section or "no neighbour was left out" in section
        assert "<summary>LLVM IR</summary>" in section and "define" in section
    assert "sf.matmul_add is not elementwise" in page


def test_the_buffer_plan_shows_the_peak_against_the_lower_bound(mlp_page):
    _, page = mlp_page
    section = page.split('<section id="buffers">')[1].split("</section>")[0]
    assert re.search(r"peak [\d,]+ bytes; liveness lower bound [\d,]+ bytes, [\d.]+x", section)
    assert "<svg" in section and "<rect" in section


def test_ops_point_at_the_user_source(mlp_page):
    _, page = mlp_page
    assert "mlp_train.py:" in page
    anchors = set(re.findall(r'href="#(src-[^"]+)"', page))
    assert anchors and all(f'id="{a}"' in page for a in anchors)


def test_fusion_notes_name_each_reason():
    @sf.function
    def f(x, v):
        a = sf.exp(x)
        s = sf.reduce_sum(a, axis=1, keepdims=True)
        return sf.matmul(a / s, x) + 1.0, sf.tanh(v)

    x, v = sf.constant(np.ones((3, 3), np.float32)), sf.constant(np.ones(4, np.float32))
    with fusion_notes() as notes:
        f.get_concrete_function(x, v).ir("optimized")
    reasons = {n.reason for n in notes}
    assert any("path between them" in r for r in reasons)
    assert any("also used elsewhere" in r for r in reasons)
    assert any("sf.matmul_add is not elementwise" in r for r in reasons)  # (+ 1.0 fused)
    assert all(n.kernel.startswith(("f_kernel", "sf.")) for n in notes)


def test_report_dir_writes_a_page_per_compile(tmp_path, monkeypatch):
    monkeypatch.setattr(sf.config, "report_dir", str(tmp_path))

    @sf.function
    def square_sum(x):
        return sf.reduce_sum(sf.tanh(x) * x)

    x = sf.constant(np.linspace(-1, 1, 8, dtype=np.float32))
    square_sum(x)
    with sf.GradientTape() as tape:  # a staged gradient: forward and backward
        tape.watch(x)
        y = square_sum(x)
    tape.gradient(y, x)
    module = sf.Module()
    module.f = sf.function(lambda t: t * 2.0, input_signature=[sf.TensorSpec([3])])
    sf.saved.save(module, str(tmp_path / "saved"))
    sf.saved.load(str(tmp_path / "saved")).f(sf.constant([1.0, 2.0, 3.0]))
    sf.aot.compile(square_sum, sf.TensorSpec([8])).save(str(tmp_path / "lib.so"))
    pages = sorted(p.name for p in tmp_path.glob("*.html"))
    assert len(pages) >= 4, pages
    texts = [p.read_text() for p in sorted(tmp_path.glob("*.html"))]
    assert any("after remat" in t and "<th>residuals</th>" in t for t in texts)  # the gradient
    assert any("<td>the first call</td>" in t for t in texts)  # the sf.function's history
    assert sum("square_sum" in name for name in pages) >= 2  # the JIT's and the library's


def test_the_command_line_writes_the_page(tmp_path, capsys):
    source = tmp_path / "model.py"
    source.write_text("import stageflow as sf\n\ndef f(x):\n    return sf.exp(x) * 2.0\n")
    out = tmp_path / "f.html"
    assert main(["report", f"{source}:f", "--arg", "f32[?,4]", "-o", str(out)]) == 0
    page = out.read_text()
    assert "model.py:4" in page and '<section id="kernels">' in page


def test_the_page_loads_in_headless_chromium_without_console_errors(mlp_page, chromium,
                                                                    tmp_path):
    path, _ = mlp_page
    browser = chromium
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
             "--v=0", f"--user-data-dir={tmp_path / 'profile'}"]
    result = subprocess.run([browser, *flags, "--dump-dom", path.as_uri()], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    for key, title in SECTIONS:
        assert f'<section id="{key}"><h2>{title}</h2>' in dom
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "rror" in line or "Uncaught" in line], console
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1200,1400",
                    path.as_uri()], capture_output=True, timeout=120, check=True,
                   env={**os.environ, "HOME": str(tmp_path)})
    assert shot.stat().st_size > 10_000


def _markup(name: str) -> tuple[PageMarkup, str]:
    page = report_of(name)
    return PageMarkup(page), page


@pytest.mark.parametrize("name", ['f onmouseover=alert(1) x', 'f" onclick="alert(1)',
                                  "f<script>&amp;'\nq"])
def test_hostile_function_names_add_no_attributes_to_the_page(name):
    """A function's name reaches ids and headings: quoted and escaped, it adds no attribute
    (the page of a plain name has them all) and no tag."""
    markup, page = _markup(name)
    plain, _ = _markup("f")
    assert markup.attributes <= plain.attributes, markup.attributes - plain.attributes
    assert markup.tags <= plain.tags, markup.tags - plain.tags
    assert "<script>" not in page
