"""Sphinx configuration of dlbridge's documentation site (built by scripts/docs)."""

import os
import re

_here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_here, "..", "include", "dlbridge", "version.hpp")) as _f:
    release = re.search(r'DLBRIDGE_VERSION_STRING "([^"]+)"', _f.read()).group(1)
version = release

project = "dlbridge"
author = "the dlbridge developers"
copyright = "dlbridge developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# README.md is included by index.md, not built as a page of its own.
exclude_patterns = ["_build", "README.md"]

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"

html_theme = "furo"
html_title = f"dlbridge {release}"
html_static_path = []
