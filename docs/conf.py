"""Sphinx configuration of the profiling guide.

The gallery (``examples/``) is executed by sphinx-gallery; the concept pages
(``docs/concepts/``) are MyST notebooks executed by myst-nb on the CPU.
``PROFILING_GUIDE_MODE`` (auto | live | replay) decides whether the examples
measure on a GPU or replay the recordings in ``docs/recordings``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sphinx_gallery.sorting import FileNameSortKey

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # for _gallery_hooks

project = "profiling-guide"
author = "the profiling-guide authors"
copyright = "2026, the profiling-guide authors"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "myst_nb",
    "sphinx_copybutton",
]

# sphinx-gallery writes a .ipynb (and .py, .zip, .md5, .json) beside each
# generated page; myst-nb would take the .ipynb as a second source of the same
# document. Keep it away from everything the gallery generates.
GALLERY_DIR = "auto_examples"
exclude_patterns = [
    "_build",
    "jupyter_execute",
    "recordings",
    "**.ipynb_checkpoints",
    *[f"{GALLERY_DIR}/{depth}*.{ext}" for depth in ("", "**/") for ext in ("ipynb", "py", "zip", "md5", "json")],
]

nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_excludepatterns = [f"{GALLERY_DIR}/*", f"{GALLERY_DIR}/**"]
myst_enable_extensions = ["colon_fence", "dollarmath"]

sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": GALLERY_DIR,
    "filename_pattern": r"/plot_",
    "within_subsection_order": FileNameSortKey,
    "capture_repr": ("_repr_html_", "__repr__"),
    "reset_modules": ("matplotlib", "_gallery_hooks.reset_torch"),
    "show_memory": False,
    "remove_config_comments": True,
    "download_all_examples": False,
    "matplotlib_animations": False,
    "image_srcset": ["2x"],
    "default_thumb_file": str(HERE / "_static" / "thumb.png"),
    "min_reported_time": 0,
}

autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_numpy_docstring = True

html_theme = "pydata_sphinx_theme"
html_title = "profiling-guide"
html_static_path = ["_static"]
html_css_files = ["guide.css"]
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
}

suppress_warnings = ["config.cache"]
