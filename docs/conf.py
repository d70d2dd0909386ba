"""Sphinx configuration of the profiling guide.

The gallery (``examples/``) is executed by sphinx-gallery; the concept pages
(``docs/concepts/``) are MyST notebooks executed by myst-nb on the CPU.
``PROFILING_GUIDE_MODE`` (auto | live | replay) decides whether the examples
measure on a GPU or replay the recordings in ``docs/recordings``.

Besides the configuration, this file holds the site's small extensions:

* ``pg-ladder`` and ``pg-automodules``, two directives that write the landing
  page's ladder and the API page from what exists in the checkout, so a rung or
  a module that is not written yet leaves no broken link behind;
* a hook that copies the recordings into the built site as ``_recordings/``,
  where each example page's banner links them;
* a hook that writes sample ``profiling-guide report`` pages into the built
  site as ``_reports/``, where the report page links them;
* a hook that keeps sphinx-gallery's execution-time report free of scripts
  and styles fetched from other sites (the site works offline);
* ``pg-headlines``, the landing page's table of both GPUs' headline figures,
  read from each GPU's ``bench_mlp.json``.

The chapters' figures are saved and written by ``_figures.py`` (an extension
and sphinx-gallery's image scraper), so that they stay legible on a phone.

One build per GPU: ``PROFILING_GUIDE_GPU`` names the recordings a build
replays, and ``_static/switcher.json`` lists the builds (``version``: the
recordings folder, ``url``: where the build lives, relative to the site's
root). The navbar's switcher and a footer link lead to the same page in the
other GPU's build.
"""

from __future__ import annotations

import datetime
import hashlib
import html
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import shutil
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.nodes import nested_parse_with_titles
from sphinx_gallery.sorting import FileNameSortKey

from profiling_guide.pages.recordings import DEFAULT_GPU, GPU_ENV, default_root

HERE = Path(__file__).parent
REPO = HERE.parent
EXAMPLES = REPO / "examples"
sys.path.insert(0, str(HERE))  # for _gallery_hooks
# The notebook pages run in kernels started in docs/, where a relative
# PYTHONPATH (PYTHONPATH=src) names other folders: point them at the
# profiling_guide this build imports.
if os.environ.get("PYTHONPATH"):
    import profiling_guide

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(profiling_guide.__file__).resolve().parents[1]), os.environ["PYTHONPATH"]])

logger = logging.getLogger("profiling_guide.docs")

project = "profiling-guide"
author = "the profiling-guide authors"
copyright = "2026, the profiling-guide authors"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "_figures",  # after the gallery: its figures legible on a phone (docs/_figures.py)
    "myst_nb",
    "sphinx_copybutton",
    "_glossary_links",  # docs/_glossary_links.py: each glossary term linked from its first use on a page
    "_banner_first",  # docs/_banner_first.py: a chapter's recording banner above its first section
]

# sphinx-gallery writes a .ipynb (and .py, .zip, .md5, .json) beside each
# generated page; myst-nb would take the .ipynb as a second source of the same
# document. Keep it away from everything the gallery generates.
GALLERY_DIR = "auto_examples"
exclude_patterns = [
    "_build",
    "jupyter_execute",
    "recordings",
    "samples",  # traces the report page reads (docs/samples/h100x4), not pages
    "**.ipynb_checkpoints",
    *[f"{GALLERY_DIR}/{depth}*.{ext}" for depth in ("", "**/") for ext in ("ipynb", "py", "zip", "md5", "json")],
]

nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_excludepatterns = [f"{GALLERY_DIR}/*", f"{GALLERY_DIR}/**"]
myst_enable_extensions = ["colon_fence", "dollarmath", "substitution"]

sphinx_gallery_conf = {
    "examples_dirs": str(EXAMPLES),
    "gallery_dirs": GALLERY_DIR,
    # Which examples run (the others get a page with their code and no output):
    # PROFILING_GUIDE_EXAMPLES='plot_09' builds one chapter's page quickly.
    "filename_pattern": os.environ.get("PROFILING_GUIDE_EXAMPLES") or r"/plot_",
    "within_subsection_order": FileNameSortKey,
    "capture_repr": ("_repr_html_", "__repr__"),
    "reset_modules": ("matplotlib", "_gallery_hooks.reset_torch", "_gallery_hooks.chapter_clock"),
    "reset_modules_order": "both",
    "show_memory": False,
    "remove_config_comments": True,
    "download_all_examples": False,
    "matplotlib_animations": False,
    "image_srcset": ["2x"],
    # sphinx-gallery's matplotlib scraper, each figure tagged with its smallest text (docs/_figures.py)
    "image_scrapers": ("_figures.scrape_figures",),
    "default_thumb_file": str(HERE / "_static" / "thumb.png"),
    "min_reported_time": 0,
    # The landing page's `minigallery` reads example files by glob; it wants a
    # backreferences folder to exist, which lives with the build output.
    "backreferences_dir": "_build/backreferences",
}

autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_numpy_docstring = True

# Copy buttons copy the commands: prompts (>>>, $, In [1]:) and the output lines after them stay behind.
copybutton_prompt_text = r">>> |\.\.\. |\$ |In \[\d*\]: | {2,5}\.\.\.: | {5,8}: "
copybutton_prompt_is_regexp = True
copybutton_exclude = ".linenos, .gp, .go"

html_theme = "pydata_sphinx_theme"
html_title = "profiling-guide"
html_static_path = ["_static"]
html_css_files = ["guide.css"]
html_js_files = ["guide.js"]
html_favicon = "_static/favicon.svg"
html_show_sourcelink = False
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "header_links_before_dropdown": 5,
    "navbar_align": "left",
    "show_prev_next": True,
    "footer_start": ["copyright"],
    "footer_end": ["build-mode"],
}
# A chapter gives its article the width of the screen: its table of contents moves from the right-hand
# sidebar (none on a chapter page, see chapter_layout) to the top of the left one, above the
# chapters; a narrow screen folds that sidebar into its menu.
CHAPTER_PAGES = f"{GALLERY_DIR}/**plot_*"
html_sidebars = {"index": [], "api": [], "about": [], CHAPTER_PAGES: ["page-toc", "pg-chapters.html"]}
templates_path = ["_templates"]

suppress_warnings = ["config.cache"]


# ------------------------------------------------------ one build per GPU
SWITCHER = json.loads((HERE / "_static" / "switcher.json").read_text())
BUILD_GPU = os.environ.get(GPU_ENV) or DEFAULT_GPU
THIS_BUILD = next((b for b in SWITCHER if b["version"] == BUILD_GPU), None)
if THIS_BUILD is None:
    raise ValueError(f"{GPU_ENV}={BUILD_GPU}: docs/_static/switcher.json has no build for it "
                     f"(it lists {', '.join(b['version'] for b in SWITCHER)})")
# From this build's root up to the site's root: "" for the default build, "../" for one in h200/.
SITE_ROOT = "../" * len(Path(THIS_BUILD["url"]).parts)

html_theme_options["switcher"] = {"json_url": "_static/switcher.json", "version_match": BUILD_GPU}
# A page names the GPU of its build as {{ build_gpu }} (the report page's sample was recorded on it).
myst_substitutions = {"build_gpu": THIS_BUILD["name"]}
html_theme_options["navbar_end"] = ["version-switcher", "theme-switcher", "navbar-icon-links"]


def _repository_url() -> str | None:
    """Where the source lives: ``$PROFILING_GUIDE_REPOSITORY``, else pyproject's ``[project.urls]``."""
    import tomllib

    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("urls", {})
    url = os.environ.get("PROFILING_GUIDE_REPOSITORY") or urls.get("Repository") or urls.get("Source")
    return url if url and url.startswith(("https://", "http://")) else None


# The repository in the header, as an icon link, wherever its address is known.
REPOSITORY_URL = _repository_url()
if REPOSITORY_URL:
    html_theme_options["icon_links"] = [
        {"name": "Source repository", "url": REPOSITORY_URL, "icon": "fa-brands fa-git-alt"}]

# sphinx-gallery skips an example whose source has not changed since the last
# build; the gallery folder is shared by the builds, so after another GPU's
# build every example runs again, as it does after a change to how the figures
# are saved (docs/_figures.py). The marker is written once a build succeeds.
GALLERY_GPU = HERE / GALLERY_DIR / ".built-for-gpu"
GALLERY_STAMP = f"{BUILD_GPU} figures:{hashlib.sha256((HERE / '_figures.py').read_bytes()).hexdigest()[:12]}"
if not (GALLERY_GPU.is_file() and GALLERY_GPU.read_text().strip() == GALLERY_STAMP):
    sphinx_gallery_conf["run_stale_examples"] = True
    GALLERY_GPU.unlink(missing_ok=True)


def mark_gallery_gpu(app, exception) -> None:
    if exception is None and GALLERY_GPU.parent.is_dir():
        GALLERY_GPU.write_text(GALLERY_STAMP + "\n")


def build_href(docname: str, build: dict, page: str = "index") -> str:
    """The relative link from ``docname`` of this build to ``page`` of ``build``."""
    url = "" if build["url"] in ("./", "") else build["url"]
    return "../" * docname.count("/") + SITE_ROOT + url + page + ".html"


def other_builds(app, pagename, templatename, context, doctree) -> None:
    """The footer's links to this page in the other GPUs' builds (they work without JavaScript too)."""
    context["pg_other_builds"] = [(b["name"], build_href(pagename, b, pagename))
                                  for b in SWITCHER if b is not THIS_BUILD]
    context["pg_this_build"] = THIS_BUILD["name"]


def is_chapter(pagename: str) -> bool:
    """A gallery example's page (``auto_examples/plot_01_linear``), as against the gallery's index."""
    return pagename.startswith(f"{GALLERY_DIR}/") and pagename.rsplit("/", 1)[-1].startswith("plot_")


def chapter_sidebar(app, pagename, templatename, context, doctree) -> None:
    """A chapter's ``<body>`` gets the class ``pg-chapter`` (guide.css widens it), its left sidebar the ladder.

    ``pg_chapters``: the ladder's rungs, one short line each, for
    ``_templates/pg-chapters.html``. Runs before the theme's hook (priority
    400 < 500) that drops the sidebar templates which render empty.
    """
    context["pg_chapter"] = is_chapter(pagename)
    if not context["pg_chapter"]:
        return
    chapters = chapter_numbers()
    context["pg_chapters"] = [
        {"number": number.removesuffix(DEEP), "name": name, "optional": optional, "current": docname == pagename,
         "href": app.builder.get_relative_uri(pagename, docname)}
        for number, name, optional in ladder_rungs() if number in chapters
        for docname in [f"{GALLERY_DIR}/{chapters[number].relative_to(EXAMPLES).with_suffix('').as_posix()}"]]


def chapter_layout(app, pagename, templatename, context, doctree) -> None:
    """A chapter page has no right-hand sidebar: its table of contents is in the left one.

    Runs after the theme's own hook (priority 600 > 500), which fills ``secondary_sidebar_items``.
    """
    if context.get("pg_chapter"):
        context["secondary_sidebar_items"] = []


# ----------------------------------------------------------------- build mode
def _build_mode() -> str:
    """``live`` or ``replay``, decided as the examples decide it; the footer of every page says which."""
    requested = os.environ.get("PROFILING_GUIDE_MODE", "auto").strip().lower()
    if requested in ("live", "replay"):
        return requested
    try:
        import torch

        return "live" if torch.cuda.is_available() else "replay"
    except ImportError:
        return "replay"


html_context = {"pg_build_mode": _build_mode(), "default_mode": "auto"}


# ---------------------------------------------------------- the ladder (index)
#: A chapter's number is the first word of its title: ``6b · The training step: ...``; a deep dive's
#: title starts ``Deep dive 6b · ...`` and its rung's number is ``6b deep``.
CHAPTER_TITLE = re.compile(r'^\s*(?:[rRuU]?""")?\s*(?P<deep>Deep dive )?(?P<number>\d+[a-z]?) · (?P<title>.+)$',
                           re.M)
DEEP = " deep"  # what a deep dive's rung number adds to its lesson's


def chapter_numbers() -> dict[str, Path]:
    """Each example by the number its title gives it (``{"1": plot_01_linear.py, "6b": ...}``).

    The title is the docstring's first line; sphinx-gallery makes it the page's
    title, and the ladder shows the same number. An example in a subfolder of
    ``examples/`` (a gallery section) counts too.
    """
    found: dict[str, Path] = {}
    for path in sorted(EXAMPLES.rglob("plot_*.py")):
        head = path.read_text(encoding="utf-8")[:600]
        title = CHAPTER_TITLE.search(head)
        if title is None:
            raise ValueError(f"{path.relative_to(REPO)}: its title does not start with its number "
                             f"(\"6b · The training step ...\"): the ladder finds chapters by it")
        number = title.group("number") + (DEEP if title.group("deep") else "")
        if number in found:
            raise ValueError(f"{path.relative_to(REPO)} and {found[number].relative_to(REPO)} both have number {number}")
        found[number] = path
    return found


def ladder_rungs() -> list[tuple[str, str, bool]]:
    """The landing page's rungs as ``(number, name, optional)``, read from its ``pg-ladder`` block."""
    block = re.search(r"```\{pg-ladder\}\n(.*?)```", (HERE / "index.md").read_text(encoding="utf-8"), re.S)
    rungs = []
    for line in (block.group(1) if block else "").splitlines():
        if line.strip() and not line.startswith(":"):  # ``:short-path:`` is an option, not a rung
            number, name, _, *flags = (part.strip() for part in line.split("|"))
            rungs.append((number, name, Ladder.OPTIONAL in flags))
    return rungs


class Ladder(Directive):
    """The landing page's rungs: ``number | name | question``, one a line, and ``| deep dive`` for an optional page.

    ``number`` is the chapter's own (its title's first word, ``6b``): the rung
    shows it and links that chapter. A rung whose chapter does not exist yet is
    listed without a link, so the landing page never breaks; a chapter with no
    rung fails the build (a warning, which ``-W`` makes an error).
    """

    has_content = True
    option_spec = {"short-path": directives.unchanged_required}
    OPTIONAL = "deep dive"
    SHORT = "short path"

    def run(self):
        chapters = chapter_numbers()
        items = nodes.bullet_list(classes=["pg-ladder"])
        listed = []
        # The rungs a reader profiling their own model needs, in order: marked on the ladder, and said above it.
        short = self.options.get("short-path", "").split()
        for line in self.content:
            if not line.strip():
                continue
            number, name, question, *flags = (part.strip() for part in line.split("|"))
            if any(f != self.OPTIONAL for f in flags):
                raise self.error(f"pg-ladder: {line!r}: the only flag after the question is '| {self.OPTIONAL}'")
            listed.append(number)
            example = chapters.get(number)
            optional = self.OPTIONAL in flags
            item = nodes.list_item(classes=["pg-rung"] + ([] if example else ["pg-rung-planned"])
                                   + (["pg-rung-optional"] if optional else [])
                                   + (["pg-rung-short"] if number in short else []))
            para = nodes.paragraph()
            para += nodes.inline(text=number.removesuffix(DEEP), classes=["pg-rung-number"])
            if example:
                ref = nodes.inline("", "", nodes.Text(name))
                target = example.relative_to(EXAMPLES).with_suffix("").as_posix()
                para += nodes.strong("", "", _doc_xref(self, f"/{GALLERY_DIR}/{target}", ref))
            else:
                para += nodes.strong(text=name)
            if optional:
                para += nodes.inline(text="optional deep dive", classes=["pg-optional"])
            if number in short:
                para += nodes.inline(text=self.SHORT, classes=["pg-short"])
            para += nodes.Text(" — " + question)
            if not example:
                para += nodes.inline(text=" (in preparation)", classes=["pg-planned"])
            item += para
            items += item
        unknown = [n for n in short if n not in listed]
        if unknown:
            raise self.error(f"pg-ladder: :short-path: names {', '.join(unknown)}, which no rung has")
        missing = [n for n in chapters if n not in listed]
        if missing:
            logger.warning(f"[ladder] chapters with no rung on the landing page: "
                           f"{', '.join(f'{n} ({chapters[n].name})' for n in missing)}; add them to pg-ladder",
                           location=self.state.document.settings.env.docname)
        if not short:
            return [items]
        path = nodes.paragraph(classes=["pg-short-path"])
        path += nodes.strong(text="Profiling your own model? ")
        path += nodes.Text("The short path: ")
        for i, number in enumerate(short):
            if i:
                path += nodes.Text(" → ")
            example = chapters.get(number)
            target = example.relative_to(EXAMPLES).with_suffix("").as_posix() if example else None
            path += (_doc_xref(self, f"/{GALLERY_DIR}/{target}", nodes.inline(text=number)) if example
                     else nodes.Text(number))
        path += nodes.Text(f", each marked “{self.SHORT}” below: one layer, an MLP, the host's overhead, "
                           "your own model, attention, several GPUs.")
        return [path, items]


def _doc_xref(directive: Directive, target: str, content: nodes.Node, *, explicit: bool = True) -> nodes.Node:
    """A ``:doc:`` reference; with ``explicit=False`` Sphinx writes the target's title."""
    from sphinx.addnodes import pending_xref

    env = directive.state.document.settings.env
    return pending_xref("", content, refdomain="std", reftype="doc", reftarget=target,
                        refdoc=env.docname, refexplicit=explicit, refwarn=True)


class DocList(Directive):
    """A bullet list linking every document that matches a glob (``concepts/*``), by title.

    Unlike a second ``toctree`` it leaves each page's place in the navigation alone.
    """

    required_arguments = 1

    def run(self):
        env = self.state.document.settings.env
        pattern = self.arguments[0]
        found = sorted({p.with_suffix("").relative_to(HERE).as_posix()
                        for ext in env.config.source_suffix for p in HERE.glob(pattern + ext)})
        items = nodes.bullet_list(classes=["pg-doclist"])
        for docname in found:
            item = nodes.list_item()
            item += nodes.paragraph("", "", _doc_xref(self, "/" + docname, nodes.inline(), explicit=False))
            items += item
        return [items]


# ------------------------------------------------------------------- API page
PACKAGE = "profiling_guide"


class AutoModules(Directive):
    """One section per part of the package, and an ``automodule`` per module in it.

    The content lists the parts and top-level modules (short names) in
    reading order; those the list leaves out follow, sorted. A part's section
    opens with its package docstring, then one subsection per module of the
    part (nested packages too). A listed name that does not exist yet is
    skipped with a note in the build log; a module that exists but fails to
    import fails the build, as autodoc would.
    """

    has_content = True

    def run(self):
        pkg = importlib.import_module(PACKAGE)
        present = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
        wanted = [line.strip() for line in self.content if line.strip()]
        missing = [m for m in wanted if m not in present]
        if missing:
            logger.info(f"[api] not written yet, left off the API page: {', '.join(missing)}")
        order = [m for m in wanted if m in present] + [m for m in present if m not in wanted]
        lines: list[str] = []
        for short in order:
            name = f"{PACKAGE}.{short}"
            module = importlib.import_module(name)
            is_part = hasattr(module, "__path__")
            title = f"``{short}/``" if is_part else f"``{short}``"
            lines += [f".. _api-{short}:", "", title, "=" * len(title), ""]
            if not is_part:
                lines += [f".. automodule:: {name}", "   :members:", "", ""]
                continue
            lines += [f".. automodule:: {name}", ""]
            inner = sorted(m.name for m in pkgutil.walk_packages(module.__path__, f"{name}.")
                           if not m.name.rsplit(".", 1)[1].startswith("_"))
            for full in inner:
                sub = full.removeprefix(f"{PACKAGE}.")
                subtitle = f"``{sub}``"
                lines += [f".. _api-{sub.replace('.', '-')}:", "", subtitle, "-" * len(subtitle), "",
                          f".. automodule:: {full}", "   :members:", "", ""]
        container = nodes.container(classes=["pg-api"])
        nested_parse_with_titles(self.state, StringList(lines, source="api"), container)
        return container.children


class RecordingsTable(Directive):
    """A table of the recordings published with the site, linked under ``_recordings/``."""

    def run(self):
        root = _recordings_root()
        env = self.state.document.settings.env
        prefix = "../" * env.docname.count("/")
        rows = []
        for folder in [root / BUILD_GPU] if (root / BUILD_GPU).is_dir() else ():
            names = sorted({f.name.split(".trace.json.gz")[0].split(".run.json")[0]
                            for pattern in RECORDING_PATTERNS for f in folder.glob(pattern)})
            for name in names:
                links = []
                for suffix, label in ((".trace.json.gz", "trace"), (".run.json", "run record")):
                    f = folder / f"{name}{suffix}"
                    if f.is_file():
                        href = html.escape(f"{prefix}_recordings/{folder.name}/{f.name}")
                        links.append(f'<a href="{href}" download>{label}</a> '
                                     f'<span class="pg-size">{f.stat().st_size / 1024:,.0f} KiB</span>')
                rows.append(f"<tr><td>{html.escape(folder.name)}</td><td><code>{html.escape(name)}</code></td>"
                            f"<td>{' · '.join(links)}</td></tr>")
        if not rows:
            return [nodes.paragraph(text=f"No recordings in {root.name}/ at build time.")]
        table = ('<div class="pg-scroll"><table class="pg-table pg-recordings"><thead><tr><th>GPU</th>'
                 "<th>recording</th><th>files</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")
        return [nodes.raw("", table, format="html")]


def _spread(s: dict, unit: str, digits: int = 1) -> str:
    """``median unit (IQR q1–q3)`` of a ``{median, q1, q3}`` record."""
    return f"{s['median']:,.{digits}f} {unit} (IQR {s['q1']:,.{digits}f}–{s['q3']:,.{digits}f})"


def _ratio(over: float, under: float) -> str:
    """A ratio of two medians with three digits: 1.051× must not read as 1.05×, the target it missed."""
    return f"{over / under:.3f}×"


def headline_rows(bench: dict, sweep: dict | None = None) -> list[tuple[str, str]]:
    """One GPU's headline figures from its ``bench_mlp.json``, as (what, value) rows.

    ``sweep``: chapter 6's sweep (``06_fused.sweep.run.json``), for our MLP at
    the sweep's most rows, where the bench's ratio to cuBLAS's GEMMs does not hold.
    """
    refs, variants, alone = bench["references"], bench["variants_us"], bench["gemms_alone_us"]
    sheet = refs.get("datasheet") or {}

    def median(name: str) -> str:
        return f"{variants[name]['median']:,.1f} µs" if name in variants else "–"

    # our fastest design at the time of the run: the Gluon one where the benchmark has it
    ours = next((n for n in ("fused-pingpong", "fused-packed-tma") if n in variants), "fused-packed-tma")
    fused = variants.get(ours)
    shape = bench.get("shape", {})
    at = f"{shape.get('rows', 0):,} rows, {shape.get('dim')} → {shape.get('hidden')}"
    return [
        ("GPU", bench["gpu"]["name"]),
        ("MLP input, dim → hidden", f"{shape.get('batch')}×{shape.get('seq')} = {shape.get('rows', 0):,} rows, "
                                    f"{shape.get('dim')} → {shape.get('hidden')}, {shape.get('dtype')}"),
        ("bf16 GEMM rate, measured (cuBLAS)", _spread(refs["gemm_tflops"]["spread"], "TFLOP/s")),
        ("copy bandwidth, measured", _spread(refs["copy_tbps"]["spread"], "TB/s", 2)),
        ("datasheet peaks", f"{sheet.get('model', '?')}: {sheet.get('bf16_tflops', '?')} TFLOP/s bf16, "
                            f"{sheet.get('hbm_tbps', '?')} TB/s"),
        ("cuBLAS's three GEMMs, timed alone", _spread(alone, "µs")),
        (f"our fused MLP ({ours})",
         f"{fused['median']:,.1f} µs, {_ratio(fused['median'], alone['median'])} the GEMMs alone at {at}"
         if fused else "–"),
        *_sweep_rows(sweep, shape),
        ("eager", median("eager")),
        ("torch.compile", median("compile")),
        ("Liger", median("liger")),
        *_training_rows(bench.get("training_step")),
    ]


def _sweep_rows(sweep: dict | None, shape: dict) -> list[tuple[str, str]]:
    """Our MLP against cuBLAS's GEMMs alone at the sweep's most rows (same dim → hidden as the bench)."""
    points = [v for v in (sweep or {}).get("values", [])
              if v.get("dim") == shape.get("dim") and v.get("hidden") == shape.get("hidden")
              and "fused" in v.get("variants_us", {}) and "gemms_alone_us" in v]
    if not points:
        return []
    most = max(points, key=lambda v: v["rows"])
    if most["rows"] <= shape.get("rows", 0):
        return []
    ours, alone = most["variants_us"]["fused"]["median"], most["gemms_alone_us"]["median"]
    return [(f"our fused MLP at {most['rows']:,} rows (chapter 6's sweep)",
             f"{ours:,.1f} µs, {_ratio(ours, alone)} the GEMMs alone ({alone:,.1f} µs)")]


def _training_rows(step: dict | None) -> list[tuple[str, str]]:
    """The training step's headline rows (``bench-mlp --backward``), where the benchmark has them."""
    if not step or "nine_gemms_us" not in step:
        return []
    nine, ours = step["nine_gemms_us"], step["variants_us"].get("fused")
    return [
        ("training step: cuBLAS's nine GEMMs, timed alone back to back", _spread(nine, "µs")),
        ("training step: ours (forward + backward)",
         f"{ours['median']:,.1f} µs, {_ratio(ours['median'], nine['median'])} the nine GEMMs" if ours else "–"),
    ]


def _glossed(text: str) -> str:
    """``text`` as HTML, each "IQR" with its meaning on hover (a tooltip takes no room on a phone)."""
    return html.escape(text).replace(
        "IQR", '<abbr title="interquartile range: the middle half of the repeats">IQR</abbr>')


class Headlines(Directive):
    """Both GPUs' headline figures side by side, from each build's ``bench_mlp.json``.

    One column per build of ``_static/switcher.json``; its header links that
    GPU's build of the site. Times are device time per forward, medians over
    the benchmark's repeats.
    """

    def run(self):
        env = self.state.document.settings.env
        columns = []
        for build in SWITCHER:
            path = _recordings_root() / build["version"] / "bench_mlp.json"
            sweep = path.with_name("06_fused.sweep.run.json")
            env.note_dependency(str(path))
            env.note_dependency(str(sweep))
            if path.is_file():
                rows = headline_rows(json.loads(path.read_text()),
                                     json.loads(sweep.read_text()) if sweep.is_file() else None)
                columns.append((build, dict(rows)))
            else:
                logger.warning(f"[headlines] no {path}: the landing page leaves {build['name']} out")
        if not columns:
            return []
        labels = list(dict.fromkeys(label for _, rows in columns for label in rows))
        head = "".join(f'<th><a href="{html.escape(build_href(env.docname, b))}">{html.escape(b["name"])}</a></th>'
                       for b, _ in columns)
        body = "".join("<tr><th>" + html.escape(label) + "</th>"
                       + "".join(f"<td>{_glossed(rows.get(label, '–'))}</td>" for _, rows in columns) + "</tr>"
                       for label in labels)
        table = ('<div class="pg-scroll"><table class="pg-table pg-headlines"><thead><tr><th></th>' + head
                 + "</tr></thead><tbody>" + body + "</tbody></table></div>")
        return [nodes.raw("", table, format="html")]


# -------------------------------------------------- recordings in the build
def _recordings_root() -> Path:
    return default_root()  # the one place that decides (PROFILING_GUIDE_RECORDINGS, else docs/recordings)


# what inductor recorded each compiled kernel fuses, beside a trace (Chapter.profile_own)
RECORDING_PATTERNS = ("*.trace.json.gz", "*.run.json", "*.kernel_information.json")


def copy_recordings(app, exception) -> None:
    """Put the recordings at ``_recordings/<folder>/<file>`` in the HTML output.

    The example pages' banners link them there, relative to the page. Every
    folder is published, not only this build's GPU's: a page of this build may
    replay another GPU's recording (a chapter not yet recorded on this GPU) or a
    set of several ranks (``<gpu>-x<n>``).
    """
    if exception is not None or app.builder.format != "html":
        return
    root = _recordings_root()
    out = Path(app.outdir) / "_recordings"
    if out.exists():
        shutil.rmtree(out)
    copied = 0
    for pattern in RECORDING_PATTERNS:
        for src in sorted(root.glob(f"*/{pattern}")):
            dest = out / src.parent.name / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
            copied += 1
    logger.info(f"[recordings] copied {copied} file(s) from {root} to {out}")


# ------------------------------------------------------ sample reports
def write_sample_reports(app, exception) -> None:
    """Write ``profiling-guide report`` of a recording and of a trace from elsewhere into ``_reports/``.

    Generated at every build rather than committed, so the samples always show
    what the code that reads them says today.
    """
    if exception is not None or app.builder.format != "html":
        return
    from profiling_guide.pages.chapter import Chapter
    from profiling_guide.report.html import write_report

    out = Path(app.outdir) / "_reports"
    out.mkdir(exist_ok=True)
    folder = Chapter("02_mlp_eager", {}).folder
    references = folder / "02_mlp_eager.references.run.json"
    write_report(folder / "02_mlp_eager.eager.trace.json.gz", out / "02_mlp_eager.eager.report.html",
                 rates=references if references.is_file() else None)
    written = 1
    # Chapter 8's own-model trace: its run record carries the rates measured beside it.
    own = folder / "08_own_model.train.trace.json.gz"
    if own.is_file():
        write_report(own, out / "08_own_model.train.report.html", rates=own.with_name("08_own_model.train.run.json"))
        written += 1
    # Chapter 8b's three variants (the folder that has them: another GPU's where this one has none yet); each
    # report reads the kernel information recorded beside its trace.
    lines = Chapter("08b_your_lines", {}).folder
    for own in sorted(lines.glob("08b_your_lines.*.trace.json.gz")):
        stem = own.name.removesuffix(".trace.json.gz")
        write_report(own, out / f"{stem}.report.html", rates=own.with_name(f"{stem}.run.json"))
        written += 1
    # Traces recorded on a GPU by scripts/record_report_samples.py (a transformers training step,
    # a compiled forward, a CUDA-graph replay, two streams), each with the rates measured beside it.
    for trace in sorted((REPO / "tests" / "data" / "gpu_samples").glob("*.trace.json.gz")):
        stem = trace.name.removesuffix(".trace.json.gz")
        record = trace.with_name(f"{stem}.run.json")
        write_report(trace, out / f"{stem}.report.html", rates=record if record.is_file() else None)
        written += 1
    # Every rank of three 4-GPU runs (docs/samples/h100x4), against the NCCL sweep measured beside them.
    from profiling_guide.report.run_html import write_run_report
    from profiling_guide.trace.run import trace_files

    runs = REPO / "docs" / "samples" / "h100x4"
    for run in ("ddp_straggler", "ddp", "fsdp2"):
        merge = out / f"h100x4_{run}.merged.json.gz" if run == "ddp_straggler" else None
        write_run_report(trace_files([runs / run]), out / f"h100x4_{run}.report.html", sweep=runs / "nccl_sweep.json",
                         merge=merge, title=f"h100x4/{run}")
        written += 1
    # Traces no one here recorded: HolisticTraceAnalysis's test data.
    for trace in sorted((REPO / "tests" / "data" / "hta").glob("*.json.gz")):
        write_report(trace, out / f"hta_{trace.name.removesuffix('.json.gz')}.report.html")
        written += 1
    logger.info(f"[reports] wrote {written} sample reports to {out}")


# ------------------------------------------- execution times, kept offline
_CDN_BLOCK = re.compile(r"^\.\. container::\n\n  \.\. raw:: html\n\n(?:    .*\n|\n)*?(?=  \.\. list-table::)", re.M)


def _build_times_record(seconds: dict[str, float]) -> dict:
    """What ``build_times.json`` holds, and what "About this build" shows: this build's seconds per chapter."""
    return {"gpu": BUILD_GPU, "date": datetime.date.today().isoformat(), "total_seconds": round(sum(seconds.values()), 1),
            "examples": {name: {"seconds": round(s, 1)} for name, s in seconds.items()}}


def write_build_times(app, exception) -> None:
    """A live build keeps each chapter's time beside its recordings, and the console gets the total.

    ``docs/recordings/<gpu>/build_times.json``: ``{"examples": {"plot_06_fused.py": {"seconds": ...}}}``,
    committed with the recordings the same build made; the "About this build" page shows it.
    """
    import _gallery_hooks

    seconds = dict(_gallery_hooks.CHAPTER_SECONDS)
    if exception is not None or not seconds:
        return
    total = sum(seconds.values())
    sys.__stderr__.write(f"[chapters] {len(seconds)} chapters in {total:.1f} s ({BUILD_GPU}, {_build_mode()})\n")
    if _build_mode() != "live":
        return
    from profiling_guide.files import write_json_atomic

    write_json_atomic(_recordings_root() / BUILD_GPU / "build_times.json", _build_times_record(seconds),
                      sort_keys=False)


class BuildTimes(Directive):
    """The live build's time per chapter, from this build's GPU's ``build_times.json``."""

    def run(self):
        import _gallery_hooks

        if _build_mode() == "live" and _gallery_hooks.CHAPTER_SECONDS:  # this very build's times
            return self._table(_build_times_record(_gallery_hooks.CHAPTER_SECONDS))
        path = _recordings_root() / BUILD_GPU / "build_times.json"
        if not path.is_file():
            para = nodes.paragraph(text=f"No live build of {THIS_BUILD['name']} has recorded its times yet.")
            return [para]
        return self._table(json.loads(path.read_text()))

    def _table(self, data: dict) -> list:
        lines = [f"Live build on {THIS_BUILD['name']}, {data.get('date', '?')}: "
                 f"{data.get('total_seconds', 0):.0f} s for the chapters.", "",
                 ".. list-table::", "   :header-rows: 1", "", "   * - chapter", "     - live seconds"]
        for name, row in data.get("examples", {}).items():
            lines += [f"   * - ``{name}``", f"     - {row['seconds']:.1f}"]
        container = nodes.container(classes=["pg-build-times"])
        nested_parse_with_titles(self.state, StringList(lines, source="build-times"), container)
        return container.children


def tidy_execution_times(app) -> None:
    """Drop the DataTables scripts and styles sphinx-gallery links from other sites.

    The report keeps its table; the site stays self-contained (no requests
    beyond its own files, so it works offline and passes the browser tests).
    """
    for path in [Path(app.srcdir) / "sg_execution_times.rst", *Path(app.srcdir, GALLERY_DIR).rglob("sg_execution_times.rst")]:
        if not path.is_file():
            continue
        text = path.read_text()
        tidy = _CDN_BLOCK.sub(".. container:: pg-exec-times\n\n", text)
        tidy = tidy.replace(":class: table table-striped sg-datatable", ":class: pg-table")
        if tidy != text:
            path.write_text(tidy)


def setup(app):
    app.add_directive("pg-ladder", Ladder)
    app.add_directive("pg-automodules", AutoModules)
    app.add_directive("pg-doclist", DocList)
    app.add_directive("pg-recordings", RecordingsTable)
    app.connect("builder-inited", tidy_execution_times, priority=900)
    app.connect("build-finished", copy_recordings)
    app.connect("build-finished", write_sample_reports)
    app.add_directive("pg-headlines", Headlines)
    app.add_directive("pg-build-times", BuildTimes)
    app.connect("build-finished", write_build_times)
    app.connect("build-finished", mark_gallery_gpu)
    app.connect("html-page-context", other_builds)
    app.connect("html-page-context", chapter_sidebar, priority=400)
    app.connect("html-page-context", chapter_layout, priority=600)
    # guide.js resolves the switcher's links from the site's root.
    app.add_js_file(None, body=f"DOCUMENTATION_OPTIONS.pg_site_root = {json.dumps(SITE_ROOT)};")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
