"""docs/SCORING.md "Worked example": every figure of its table recomputed from the example by the
code, and found, as printed, in the document."""

from __future__ import annotations

from pathlib import Path

from evaluators import stats as st
from evaluators.compare import Side, paired_comparisons

ROOT = Path(__file__).resolve().parents[2]
A = {"t1": "11", "t2": "10", "t3": "00", "t4": "11"}
B = {"t1": "11", "t2": "11", "t3": "11", "t4": "11"}
CLUSTER = {"t1": "repo:x", "t2": "repo:x", "t3": "repo:y", "t4": "repo:y"}


def _doc_rows() -> dict[str, str]:
    text = (ROOT / "docs/SCORING.md").read_text(encoding="utf-8")
    section = text[text.index("### Worked example"):]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("figure", "---"):
            rows[cells[0]] = cells[1]
    return rows


def _side(label: str, pats: dict[str, str]) -> Side:
    return Side(label, "r", label, {t: {"n": len(p), "passed": p.count("1"),
                                        "score_mean": 0.0, "pattern": p, "cluster": CLUSTER[t]}
                                    for t, p in pats.items()})


def test_worked_example_matches_the_code() -> None:
    """Wilson, t, clustered SE, pass@k/pass^k, flip rate, paired, McNemar, Holm, power."""
    rows = _doc_rows()
    lo, hi = st.wilson(5, 8)  # type: ignore[misc]
    assert rows["A's pass rate, Wilson 95%"] == f"5/8 = 0.625, [{lo:.4f}, {hi:.4f}]"
    rates = [A[t].count("1") / 2 for t in sorted(A)]
    t = st.t_interval(rates)
    q = st.t_quantile(0.975, 3)
    assert rows["A's task pass rates"] == (
        f"1, 0.5, 0, 1: mean {t['mean']}, SE {t['stderr']:.4f}, t(0.975, 3) = {q:.4f}, "
        f"interval [{t['low']:.4f}, {t['high']:.4f}]")
    c = st.clustered(rates, [CLUSTER[x] for x in sorted(A)])
    assert rows["A's clustered SE by repository"] == (
        f"{c['stderr']:g} over {c['clusters']} clusters, design effect {c['design_effect']:.4f}")
    at = sum(st.pass_at_k(2, p.count("1"), 2) for p in A.values()) / 4
    hat = sum(st.pass_hat_k(2, p.count("1"), 2) for p in A.values()) / 4
    assert rows["A's pass@2 / pass^2"] == f"{at:g} / {hat:g}"
    assert rows["A's flip rate on t2"] == f"{st.flip_rate(2, 1):.1f} (flaky)"
    (cmp,) = paired_comparisons([(_side("A", A), _side("B", B))])["comparisons"]
    pr = cmp["pass_rate"]
    assert rows["B - A paired difference"] == (
        f"{pr['difference']:g}, clustered SE {pr['stderr']:g} ({pr['clusters']} clusters, "
        f"df {pr['df']}), 95% interval [{pr['low']:.4f}, {pr['high']:.4f}]")
    assert pr["clustered"] is True
    assert rows["McNemar"] == (
        f"{cmp['pairs']} pairs, {cmp['discordant']} discordant ({cmp['a_only']} only A, "
        f"{cmp['b_only']} only B): p = {cmp['mcnemar']['p']:g}, not distinguishable at 5%")
    assert cmp["distinguishable"] is False
    assert rows["Holm of (0.01, 0.04, 0.03)"] == "(" + ", ".join(
        f"{p:g}" for p in st.holm([0.01, 0.04, 0.03])) + ")"
    assert rows["tasks for D = 0.05 at sd 0.3, 80% power, α 0.05"] == str(
        st.tasks_needed(0.05, 0.3))
