"""The verdict table: what a page shows of its checked predictions."""

import pytest

from profiling_guide.analysis import expect
from profiling_guide.analysis.expect import ClaimFailed, Prediction
from profiling_guide.pages.tables import verdict_table


def test_a_guess_is_marked_and_a_failed_guess_does_not_stop_the_page():
    verdicts = expect.judge([
        Prediction("holds", lambda _: (True, "seen")),
        Prediction("a guess that fails", lambda _: (False, "seen otherwise"), must_hold=False),
    ], None)
    html = verdict_table(verdicts)._repr_html_()
    assert html.count('class="pg-guess"') == 1 and html.index("pg-guess") > html.index("a guess that fails")
    assert "<th>from</th>" not in html  # no prediction names a source
    assert html.startswith('<div class="pg-scroll"><table') and html.endswith("</table></div>")  # scrolls on a phone
    verdicts.require()  # only the guess failed


def test_a_failed_claim_stops_the_page_and_sources_show_when_named():
    verdicts = expect.judge([Prediction("must hold", lambda _: (False, "no"), source=expect.POST)], None)
    assert "<th>from</th>" in verdict_table(verdicts)._repr_html_()
    with pytest.raises(ClaimFailed, match="must hold"):
        verdicts.require()


def test_a_prediction_reads_its_own_data_where_it_names_one():
    verdicts = expect.judge([
        Prediction("reads the data judge() is given", lambda d: (d == "trace", d)),
        Prediction("reads its own", lambda d: (d == "timings", d), of="timings"),
    ], "trace")
    assert [v.holds for v in verdicts] == [True, True] and [v.seen for v in verdicts] == ["trace", "timings"]
