"""The comparison page of `ledger view`: who passed what per task and agent, intervals on the
rates, the paired tests, flaky tasks and infra failures; and run A against run B. The figures
are checked against values computed here by hand from the run's plan."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ledger.journal.journal import Journal
from ledger.view import load_report
from ledger.view.html import render_html
from tests.cli.test_report_cmds import write
from tests.evaluators.test_stats_view import stats_run


def _section(page: str, testid: str) -> str:
    m = re.search(rf"<(\w+)[^>]*data-testid={testid}[\s>](.*?)</\1>", page, re.S)
    assert m is not None, testid
    return m.group(2)


def _row(table: str, task: str) -> list[str]:
    m = re.search(rf"<tr data-task='{task}'>(.*?)</tr>", table, re.S)
    assert m is not None, task
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                    m.group(1), re.S)]


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _page(tmp_path: Path, two: bool = False) -> str:
    home = tmp_path / "L"
    home.mkdir()
    b = stats_run(record=False)
    write(home, b)
    runs = [b.run]
    if two:
        other = stats_run(record=False, infra=False)
        other.run = "r-20261201T120000Z-bbbbbb"
        other.entries = [type(e)(e.seq, e.ts, other.run, e.task, e.kind,
                                 {**e.data, "attempt": e.data["attempt"].replace(b.run, other.run)}
                                 if isinstance(e.data.get("attempt"), str) else e.data, e.raw)
                         for e in other.entries]
        write(home, other)
        runs.append(other.run)
    with Journal.open(home / "journal.db") as j:
        return render_html([load_report(j, r) for r in runs])


def test_who_passed_what_per_task_and_agent(tmp_path: Path) -> None:
    """Each cell is the agent's repeats on the task (1 passed, 0 failed, x infra) and
    passed/scored; the last column names the agents that passed every scored repeat."""
    who = _section(_page(tmp_path), "who-passed")
    assert _row(who, "t1") == ["t1", "1110 3/4", "111 3/3", "beta"]  # alpha crashed at repeat 4
    assert _row(who, "t2") == ["t2", "110 2/3", "000x 0/3", "none"]  # beta's 503 is an x
    assert _row(who, "t4") == ["t4", "111x 3/3", "101 2/3", "alpha"]  # alpha's full disk
    assert "class=warn" in re.search(r"<tr data-task='t4'>.*?</tr>", who, re.S).group(0)


def test_rates_carry_wilson_intervals_and_infra_counts(tmp_path: Path) -> None:
    """alpha scored 13 attempts (one excluded), passed 8: its Wilson interval as computed
    here; beta's infra failures are 2."""
    table = _section(_page(tmp_path), "intervals")
    alpha = re.search(r"<tr><td>alpha</td>(.*?)</tr>", table, re.S).group(1)
    low, high = _wilson(8, 13)
    assert "8/13" in alpha and f"[{low:.3f}, {high:.3f}]" in alpha
    beta = [re.sub(r"<[^>]+>", "", c) for c in re.findall(
        r"<td[^>]*>(.*?)</td>", re.search(r"<tr><td>beta</td>.*?</tr>", table, re.S).group(0))]
    assert beta[0] == "beta" and beta[7] == "2"


def test_paired_agents_show_mcnemar_on_the_discordant_pairs(tmp_path: Path) -> None:
    """Same task and repeat: alpha alone passed t2 repeats 1 and 2 and t4 repeat 2 (3 pairs),
    beta alone none; McNemar exact p = 2 * P(X <= 0), X ~ Bin(3, 1/2) = 0.25."""
    page = _page(tmp_path)
    paired = _section(page, "paired")
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", paired)]
    assert cells[:4] == ["beta vs alpha", "4", "0", "3"]
    assert cells[6:8] == ["0.25", "0.25"] and "not distinguishable from zero" in cells[8]
    differing = _section(page, "differing")
    assert "<td>t2</td>" in differing and "<td>t3</td>" not in differing  # t3: 000 and 000


def test_flaky_tasks_and_infra_failures_are_listed(tmp_path: Path) -> None:
    page = _page(tmp_path)
    flaky = _section(page, "flaky")
    assert "t2 (alpha): 2 of 3 passed" in flaky and "t4 (beta): 2 of 3 passed" in flaky
    infra = _section(page, "infra-failures")
    assert "over 28 attempts, 3 infra failure(s) excluded" in infra
    assert "sandbox 1" in infra and "endpoint 1" in infra and "disk_full 1" in infra


def test_two_runs_pair_the_same_agents_task_by_task(tmp_path: Path) -> None:
    """Run B has no infra failures: the cross-run table pairs A:alpha with B:alpha and A:beta
    with B:beta and lists the tasks whose pass rates differ."""
    cross = _section(_page(tmp_path, two=True), "cross-comparison")
    assert "B:alpha vs A:alpha" in cross and "B:beta vs A:beta" in cross


def test_the_score_card_gives_the_reports_score_with_infra_failures_apart(tmp_path: Path) -> None:
    """Under the recorded score, the score `ledger report` heads with (infra failures excluded),
    marked with its report field so the browser test checks it against `report --json`."""
    from evaluators.stats_view import stats_of

    b = stats_run(record=False)
    want = stats_of(b.entries, b.run)["golden"]["score"]
    apart = _section(_page(tmp_path), "infra-apart")
    assert f'data-k="statistics.golden.score" data-v="{want}">{want:.4f}</b>' in apart
    assert "over 28 attempts, 3 infra failure(s) excluded" in apart


# ---------------------------------------------------------------------------- the comparison page

def _home(tmp_path: Path, two: bool = False) -> tuple[Path, list[str]]:
    """The fixture run (and, with ``two``, a second run without infra failures) in a journal."""
    home = tmp_path / "L"
    home.mkdir()
    b = stats_run(record=False)
    write(home, b)
    runs = [b.run]
    if two:
        other = stats_run(record=False, infra=False)
        other.run = "r-20261201T120000Z-bbbbbb"
        other.entries = [type(e)(e.seq, e.ts, other.run, e.task, e.kind,
                                 {**e.data, "attempt": e.data["attempt"].replace(b.run, other.run)}
                                 if isinstance(e.data.get("attempt"), str) else e.data, e.raw)
                         for e in other.entries]
        write(home, other)
        runs.append(other.run)
    return home, runs


def _pair(page: str, a: str, b: str) -> str:
    m = re.search(rf"<section class=compare data-testid=pair data-a='{re.escape(a)}' "
                  rf"data-b='{re.escape(b)}'>(.*?)</section>", page, re.S)
    assert m is not None, (a, b)
    return m.group(1)


def _cells(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>",
                                                                    html, re.S)]


def _totals(section: str) -> list[str]:
    m = re.search(r"<tr data-testid=totals>(.*?)</tr>", section, re.S)
    assert m is not None
    return _cells(m.group(1))


def test_the_comparison_page_pairs_each_task_repeat_by_repeat(tmp_path: Path) -> None:
    """`ledger view -o FILE` writes FILE.compare.html beside the report, linked both ways.
    Per task, alpha's and beta's repeats and the pairs of the same repeat, worked out here
    from the fixture's plan: t1 1110/111 -> 3 both; t2 110/000x -> 2 only alpha, 1 neither;
    t3 000/000x -> 3 neither; t4 111x/101 -> 2 both, 1 only alpha. Their sums are the
    comparison's own numbers (12 pairs, 3 discordant, McNemar p 0.25)."""
    from evaluators.compare import paired_comparisons, side
    from evaluators.stats_view import stats_of
    from ledger.view.write import write_report

    home, runs = _home(tmp_path)
    out = tmp_path / "report.html"
    info = write_report(home / "journal.db", runs, out)
    assert info["comparison"] == str(tmp_path / "report.compare.html")
    index = out.read_text(encoding="utf-8")
    assert "href='report.compare.html' data-testid=comparison-link" in index
    page = Path(info["comparison"]).read_text(encoding="utf-8")
    assert "href='report.html' data-testid=index-link" in page
    pair = _pair(page, "alpha", "beta")
    table = re.search(r"<table data-testid=outcome-pairs>(.*?)</table>", pair, re.S).group(1)
    assert _row(table, "t1") == ["t1", "1110", "111", "3", "0", "0", "0", "beta"]
    assert _row(table, "t2") == ["t2", "110", "000x", "0", "2", "0", "1", "neither"]
    assert _row(table, "t3") == ["t3", "000", "000x", "0", "0", "0", "3", "neither"]
    assert _row(table, "t4") == ["t4", "111x", "101", "2", "1", "0", "0", "alpha"]
    assert _totals(pair) == ["4 tasks", "", "", "5", "3", "0", "4", "12 pairs"]
    # the same numbers as the paired comparison (ledger compare --agents) computes them
    b = stats_run(record=False)
    s = stats_of(b.entries, b.run)
    (c,) = paired_comparisons([(side(s, "alpha"), side(s, "beta"))], seed_parts=(b.run,),
                              level=float(s["level"]))["comparisons"]
    assert (c["pairs"], c["a_only"], c["b_only"], c["discordant"]) == (12, 3, 0, 3)
    assert sum(r["both"] + r["neither"] for r in c["pairs_by_task"]) == 12 - 3
    summary = re.search(r"<p data-testid=pair-summary>(.*?)</p>", pair, re.S).group(1)
    assert "12 pairs of the same repeat, 3 discordant (3 only alpha, 0 only beta)" in summary
    assert "McNemar exact p = 0.25" in summary and "not distinguishable from zero" in summary


def test_the_comparison_page_pairs_the_same_agents_of_two_runs(tmp_path: Path) -> None:
    """Run B (no infra failures, one repeat fewer on the pairs run A repeated) against run A:
    A:beta's t2 000x against B:beta's 000 is 3 pairs, all neither."""
    from ledger.view.write import write_report

    home, runs = _home(tmp_path, two=True)
    info = write_report(home / "journal.db", runs, tmp_path / "ab.html")
    page = Path(info["comparison"]).read_text(encoding="utf-8")
    assert Path(info["comparison"]).name == "ab.compare.html"
    assert "Run A <code>" in page
    cross = _pair(page, "A:beta", "B:beta")
    table = re.search(r"<table data-testid=outcome-pairs>(.*?)</table>", cross, re.S).group(1)
    assert _row(table, "t2") == ["t2", "000x", "000", "0", "0", "0", "3", "neither"]
    assert _row(table, "t4") == ["t4", "101", "101", "2", "0", "0", "1", "neither"]
    # both runs' own agent pairs are on the page too
    assert page.count("data-testid=pair data-a='alpha' data-b='beta'") == 2


def test_serve_answers_the_comparison_page(tmp_path: Path) -> None:
    """--serve: / links to compare.html, which answers with the pairs and links back to /."""
    import threading
    import urllib.request

    from ledger.view.serve import make_server

    home, _ = _home(tmp_path)
    server = make_server(home / "journal.db", [], port=0, refresh_s=5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert "href='compare.html' data-testid=comparison-link" in resp.read().decode()
        with urllib.request.urlopen(url + "compare.html", timeout=10) as resp:
            page = resp.read().decode("utf-8")
        assert "href='/' data-testid=index-link" in page
        assert "<tr data-task='t2'>" in _pair(page, "alpha", "beta")
    finally:
        server.shutdown()
        server.server_close()
