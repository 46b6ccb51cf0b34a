"""``ledger view`` and ``ledger compare --json`` paired output, through click's CliRunner."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from tests.view.fixtures import HOSTILE, RUN, build, write

RUN_2 = "r-20261201T110000Z-wwwwww"


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    h = tmp_path / "L"
    h.mkdir()
    return write(h, build())


def test_view_writes_one_self_contained_page(home: Path, tmp_path: Path) -> None:
    """The page has inline CSS/JS/SVG and no reference to any URL (no src/href to a resource)."""
    out = tmp_path / "report.html"
    code, stdout, err = invoke(home, "view", "-o", str(out))
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert f"({out.stat().st_size} bytes" in stdout
    assert "<svg" in page and "<style>" in page and "<script>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert 'data-testid="content-digest"' in page


def test_view_reports_its_own_size(home: Path, tmp_path: Path) -> None:
    """The footer states the file's exact size (the size mark is replaced by the final size)."""
    out = tmp_path / "r.html"
    assert invoke(home, "view", "-o", str(out))[0] == 0
    page = out.read_text(encoding="utf-8")
    size = out.stat().st_size
    m = re.search(r"report size ([0-9.]+) (bytes|KiB)", page)
    assert m is not None
    shown = float(m.group(1)) * (1024 if m.group(2) == "KiB" else 1)
    assert abs(shown - size) <= 52  # KiB shown with one decimal


def test_view_escapes_hostile_journal_text(home: Path, tmp_path: Path) -> None:
    """Transcript and test-message text cannot close the script element or add markup."""
    out = tmp_path / "r.html"
    assert invoke(home, "view", "-o", str(out))[0] == 0
    page = out.read_text(encoding="utf-8")
    assert HOSTILE not in page
    assert page.count("</script>") == page.count("<script")


def test_view_json_names_the_file_runs_and_digests(home: Path, tmp_path: Path) -> None:
    """--json prints path, size, runs, attempt count and each run's content digest."""
    out = tmp_path / "r.html"
    code, stdout, _ = invoke(home, "view", "-o", str(out), "--json")
    d = json.loads(stdout)
    assert code == 0 and d["runs"] == [RUN] and d["attempts"] == 12
    assert d["size_bytes"] == out.stat().st_size and len(d["content_digests"][RUN]) == 64


def test_view_two_runs_side_by_side(home: Path, tmp_path: Path) -> None:
    """Two runs: both sections and a run-against-run comparison with a paired interval."""
    write(home, build(RUN_2, agents=("beta", "alpha")))
    out = tmp_path / "r.html"
    assert invoke(home, "view", RUN, RUN_2, "-o", str(out))[0] == 0
    page = out.read_text(encoding="utf-8")
    assert page.count('<section class="run"') == 2 and "Run A against run B" in page


def test_view_unknown_run_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    """An unknown run id exits non-zero with one line on stderr and writes nothing."""
    out = tmp_path / "r.html"
    code, _, err = invoke(home, "view", "r-nope", "-o", str(out))
    assert code == 2 and err.startswith("error:") and not out.exists()


def test_view_without_journal_says_so(tmp_path: Path) -> None:
    """No journal: exit 2 and a hint to run first."""
    code, _, err = invoke(tmp_path / "none", "view")
    assert code == 2 and "ledger run" in err


def test_compare_json_has_a_deterministic_paired_interval(home: Path) -> None:
    """compare --json includes the paired bootstrap; two calls give identical bytes."""
    write(home, build(RUN_2, agents=("beta",)))
    a = invoke(home, "compare", RUN, RUN_2, "--json")
    b = invoke(home, "compare", RUN, RUN_2, "--json")
    assert a == b and a[0] == 0
    p = json.loads(a[1])["paired"]
    assert p["tasks"] == 3 and p["seed"] == 0 and p["ci_low"] <= p["difference"] <= p["ci_high"]


def test_serve_binds_loopback_and_serves_the_page(home: Path) -> None:
    """The server listens on 127.0.0.1 only and answers / with the page, other paths with 404."""
    from ledger.view.serve import make_server

    server = make_server(home / "journal.db", [], port=0, refresh_s=5)
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(url, timeout=10) as resp:
            page = resp.read().decode("utf-8")
        assert RUN in page and 'http-equiv="refresh"' not in page  # the run is finished
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "other", timeout=10)
    finally:
        server.shutdown()
        server.server_close()


def test_serve_refreshes_an_unfinished_run(tmp_path: Path) -> None:
    """While the run is unfinished the served page reloads itself."""
    from ledger.view.serve import make_server

    h = tmp_path / "U"
    h.mkdir()
    b = build(tasks=1, repeats=1)
    b.entries[:] = [e for e in b.entries if e.kind != "run.finished"]
    write(h, b)
    server = make_server(h / "journal.db", [], port=0, refresh_s=3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/",
                                    timeout=10) as resp:
            assert 'http-equiv="refresh" content="3"' in resp.read().decode("utf-8")
    finally:
        server.shutdown()
        server.server_close()


def test_view_of_a_bench_run_shows_leaderboard_and_scorecards(tmp_path: Path) -> None:
    """A `ledger bench` run: the page lists the leaderboard rows, scorecards and judge order."""
    from ledger.journal.journal import Journal
    from tests.bench.builders import RUN as BENCH_RUN
    from tests.bench.builders import RunBuilder as BenchBuilder
    from tests.bench.builders import dims

    b = BenchBuilder()
    b.response("claude")
    b.response("codex")
    b.judge("gemini", ["claude", "codex"], {"claude": dims(5, 4, 5, 4), "codex": dims(3, 3, 3, 3)})
    h = tmp_path / "B"
    h.mkdir()
    with Journal.open(h / "journal.db", create=True, harness=True) as j:
        j.append_many([(e.kind, e.data, e.run, e.task) for e in b.entries])
    out = tmp_path / "b.html"
    code, _, err = invoke(h, "view", BENCH_RUN, "-o", str(out))
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    section = page[page.index("Bench leaderboard"):page.index("Failure taxonomy")]
    assert "claude" in section and "codex" in section and "Scorecards" in section
    assert section.index("claude") < section.index("codex")  # ranked by quality
    assert "judge presentation order" in section


def test_timeline_folds_long_runs_of_reads_into_one_row() -> None:
    """600 consecutive fs.read entries become one row with the count and seq range; writes stay rows."""
    from evaluators.explore import TimelineEvent
    from ledger.view.html import timeline_rows

    tl = [TimelineEvent(i, 1000 + i, None, "fs.read", f"/lib/m{i}.py") for i in range(600)]
    tl.append(TimelineEvent(600, 2000, 2001, "fs.write", "/wt/a.py"))
    tl += [TimelineEvent(601 + i, 3000, None, "fs.read", f"/wt/b{i}") for i in range(3)]
    rows = timeline_rows(tl)
    assert len(rows) == 5
    assert rows[0][3] == "fs.read x600" and rows[0][4].startswith("seq 0..599: /lib/m0.py")
    assert rows[0][4].endswith("... 594 more")
    assert rows[1] == [600, 2001, True, "fs.write", "/wt/a.py"]
    assert [r[3] for r in rows[2:]] == ["fs.read"] * 3


def test_view_open_hands_the_written_file_to_the_browser(home: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """--open opens the file:// URI of the page just written (and nothing else)."""
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url) or True)
    out = tmp_path / "r.html"
    assert invoke(home, "view", "-o", str(out), "--open")[0] == 0
    assert opened == [out.resolve().as_uri()]


def test_serve_refuses_output_options(home: Path) -> None:
    """--serve with -o or --open is a usage error (exit 2): the server writes no file."""
    code, _, err = invoke(home, "view", "--serve", "-o", "x.html")
    assert code == 2 and "--serve" in err


def test_inspect_export_of_an_unknown_run_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    """`ledger export --format inspect r-nope` exits 2 and writes nothing."""
    out = tmp_path / "x.eval"
    code, _, err = invoke(home, "export", "--format", "inspect", "r-nope", "-o", str(out))
    assert code == 2 and err.startswith("error:") and not out.exists()
