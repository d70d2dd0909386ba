"""No page calls a measured reference a "floor": a kernel may beat a reference, nothing runs below a floor.

The project's words (:mod:`profiling_guide.analysis.roofline`): a *ceiling*
is a datasheet peak, a *reference* a rate measured on the GPU at hand (the
best cuBLAS GEMM, cuBLAS's GEMMs timed alone), which a kernel may beat; the
*datasheet bound* is the least time at the ceilings. Checked in every source
a page is built from: the chapters and deep dives, the Markdown pages, the
README and the code that writes the pages' sentences and charts. What the
pages print when they run is checked in ``test_examples_visible.py``.
"""

from pathlib import Path

import pytest
from vocabulary import floor_misuses

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([
    *(ROOT / "examples").rglob("*.py"),
    *(ROOT / "examples").rglob("*.rst"),
    *(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts and "auto_examples" not in p.parts),
    ROOT / "README.md",
    *(ROOT / "src" / "profiling_guide" / "pages").glob("*.py"),
    ROOT / "src" / "profiling_guide" / "measure" / "bench_mlp.py",
])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_is_called_a_floor(path):
    found = floor_misuses(path.read_text())
    assert not found, f"{path.relative_to(ROOT)} says 'floor' of what may be beaten: " + " | ".join(found)


def test_the_check_finds_a_floor_and_passes_its_negation_and_math_floor():
    text = ("# next to two floors.\n# cuBLAS's GEMMs alone: a reference, not a\n# floor, since ours beats it.\n"
            "p = Math.floor(x); q = math.floor(y)\nThe first floor is cuBLAS.")
    assert len(floor_misuses(text)) == 2
    assert floor_misuses("a reference for the step, not a floor under it") == []
