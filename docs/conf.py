"""Sphinx configuration of the lightgbm-cegb documentation (``make docs``; built with warnings as errors by
tests/docs/test_docs.py). Pages are MyST Markdown; the API reference is generated from the numpydoc
docstrings; the examples gallery (docs/examples/) runs at build time."""

import os
import re
import sys
from pathlib import Path

import lightgbm_cegb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "lightgbm-cegb"
author = "The lightgbm-cegb developers"
copyright = "2026, The lightgbm-cegb developers"
release = version = lightgbm_cegb.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx_copybutton",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "results/*.md", "examples/README.txt", "**/GALLERY_HEADER.rst"]
templates_path = ["_templates"]
nitpicky = False

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

intersphinx_mapping = {}  # no network at build time: external names stay plain text

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "show_memory": False,
    "min_reported_time": 1,
    "write_computation_times": False,  # its page loads scripts from CDNs; the site stays self-contained
}
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

html_theme = "pydata_sphinx_theme"
html_title = f"lightgbm-cegb {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 5,
    "footer_start": ["copyright"],
}
html_static_path = ["_static"]
html_show_sourcelink = False

# numpydoc sections complete: every parameter documented (with a type and a description), none unknown, a
# Returns section where a value is returned; a warning is an error in CI.
numpydoc_validation_checks = {"GL08", "PR01", "PR02", "PR03", "PR07", "PR10", "RT01", "RT03"}
numpydoc_validation_exclude = {r"\.set_\w+_request$", r"\.__\w+__$"}

METADATA_ROUTING = re.compile(r"^set_\w+_request$")  # scikit-learn's generated metadata-routing setters


def skip_member(app, what, name, obj, skip, options):
    return True if METADATA_ROUTING.match(name) else None


def setup(app):
    app.connect("autodoc-skip-member", skip_member)
