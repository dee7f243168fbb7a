"""The documentation site builds with MkDocs in strict mode, so that a broken link, a missing
page or an API entry whose object is gone fails the suite rather than the next reader.

The real build imports the whole package (the API reference is generated from the live
objects) and renders every page, which takes tens of seconds on two cores: it runs once, and
the pages it wrote are read by several tests. That strict mode does catch a missing page, a
missing anchor and a missing API reference is shown on small sites of one page each, with the
real configuration, beside one whose links are good and which builds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# The real build takes tens of seconds, each small one a few; the group keeps the file in one
# of the suite's processes, which builds the real site once for all its tests.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("docs_site")]


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `site`: its exit status and output."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # no banner about MkDocs 2
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_api_reference_documents_the_public_names(site):
    top = page(site, "api/sf")
    # Classes, factory-made ops, lazily imported names and their doctest examples as code.
    for anchor in ("stageflow.GradientTape", "stageflow.GradientTape.gradient",
                   "stageflow.add", "stageflow.function", "stageflow.ConcreteFunction.ir"):
        assert f'id="{anchor}"' in top, anchor
    assert "Records ops on watched values while active" in top
    assert '<span class="gp">&gt;&gt;&gt; </span>' in top  # a fenced doctest, not a quote
    assert "<blockquote>" not in top
    # `sf.math` is filled at import time; only the live module shows its ops.
    assert 'id="stageflow.math.log2"' in page(site, "api/math")
    assert 'id="stageflow.saved.save.save"' in page(site, "api/saved")
    assert 'id="stageflow.train.CheckpointManager"' in page(site, "api/train")


def test_guides_are_pages_of_the_site(site):
    control = page(site, "guides/control-flow")
    assert "Control flow and Python inside staged functions" in control
    assert "newton_sqrt" in control
    assert "Reductions end the kernels of their producers" in page(site, "contributing/design")
    # A pass's own module docstring is its section of the passes guide.
    assert "compute ops on constants at compile time" in page(site, "guides/passes")
    # The images the README shows are served from where the README finds them.
    assert (site / "report.png").is_file() and (site / "performance.png").is_file()


GOOD_INDEX = "# Home\n\nSee [the guide](guide.md#a-section).\n"


def small_site(tmp_path: Path, index: str) -> Path:
    """The real configuration (theme, plugins, strictness) over one page reading `index`."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(index)
    (docs / "guide.md").write_text("# A guide\n\n## A section\n")
    plugins = {name: options for plugin in config["plugins"] if isinstance(plugin, dict)
               for name, options in plugin.items()}
    python = plugins["mkdocstrings"]["handlers"]["python"]
    python["paths"] = [str(ROOT)]
    python["options"]["extensions"] = [str(ROOT / extension)
                                       for extension in python["options"]["extensions"]]
    config.update(docs_dir=str(docs), nav=["index.md", "guide.md"])
    config.pop("exclude_docs")
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_small_site_with_good_links_builds(tmp_path):
    """The control for the test below: the small site fails only for what breaks it."""
    result = mkdocs_build(small_site(tmp_path, GOOD_INDEX), tmp_path / "site")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert 'href="guide/#a-section"' in (tmp_path / "site/index.html").read_text()


@pytest.mark.parametrize(("index", "complaint"), [
    ("# Home\n\nSee [the guide](guides/missing.md).\n", "guides/missing.md"),
    ("# Home\n\nSee [the guide](guide.md#no-such-section).\n", "no-such-section"),
    ("# Home\n\nSee [the tape][stageflow.NoSuchTape].\n", "stageflow.NoSuchTape"),
], ids=["missing page", "missing anchor", "missing API reference"])
def test_strict_build_fails_on_a_broken_link(tmp_path, index, complaint):
    result = mkdocs_build(small_site(tmp_path, index), tmp_path / "site")
    assert result.returncode != 0
    assert complaint in result.stdout + result.stderr
    assert "Aborted with" in result.stdout + result.stderr
