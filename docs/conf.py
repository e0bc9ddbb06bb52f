"""Sphinx configuration of dlbridge's documentation site (built by scripts/docs)."""

import os
import re
import shutil
import subprocess
import sys

from sphinx.errors import ConfigError

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(_here)
with open(os.path.join(_root, "include", "dlbridge", "version.hpp")) as _f:
    release = re.search(r'DLBRIDGE_VERSION_STRING "([^"]+)"', _f.read()).group(1)
version = release

project = "dlbridge"
author = "the dlbridge developers"
copyright = "dlbridge developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "breathe"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# README.md is included by index.md, not built as a page of its own.
exclude_patterns = ["_build", "README.md"]

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"

# The C++ API reference (cpp-api.md): Doxygen reads include/dlbridge (docs/Doxyfile) into XML that Breathe
# renders. It runs at the start of every build, so the page is never older than the headers.
breathe_default_project = "dlbridge"
breathe_projects = {}
breathe_default_members = ("members",)
breathe_show_define_initializer = True  # the flag macros' bits


def _run_doxygen(app):
    doxygen = shutil.which("doxygen")
    if doxygen is None:
        raise ConfigError("the C++ API page needs Doxygen: install Debian's doxygen package "
                          "(apt-get install doxygen; scripts/setup --for-tests does)")
    out = os.path.join(app.doctreedir, "doxygen")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, DLBRIDGE_DOXYGEN_OUT=out,
               DLBRIDGE_DOXYGEN_FILTER=f'"{sys.executable}" "{os.path.join(_here, "doxygen_comments.py")}"')
    done = subprocess.run([doxygen, os.path.join("docs", "Doxyfile")], cwd=_root, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0 or done.stderr.strip():
        raise ConfigError(f"doxygen docs/Doxyfile failed:\n{done.stdout}{done.stderr}")
    app.config.breathe_projects = {"dlbridge": os.path.join(out, "xml")}


def setup(app):
    app.connect("builder-inited", _run_doxygen)


html_theme = "furo"
html_title = f"dlbridge {release}"
html_static_path = []
