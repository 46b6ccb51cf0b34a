"""`ledger plan`: tasks and repeats for a paired difference, from assumptions or an earlier run,
against the normal-approximation sample size formula computed independently."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.cli.test_report_cmds import invoke, write
from tests.cli.test_stats_cmds import RUN_1, TASKS
from tests.evaluators.builders import RunBuilder, task


def _published(delta: float, sd: float) -> int:
    """n = ((z_0.975 + z_0.80) sd / delta)^2 with the tabled quantiles, rounded up."""
    return math.ceil(((1.959964 + 0.841621) * sd / delta) ** 2)


def test_plan_from_assumptions_states_them(tmp_path: Path) -> None:
    """No earlier run: the stated assumptions (0.125, 0.125, rho 0.5) and the formula's n."""
    code, out, err = invoke(tmp_path, "plan", "--detect", "0.05", "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["assumed"] is True and p["correlation"] == 0.5
    one = next(r for r in p["table"] if r["repeats"] == 1)
    sd = math.sqrt(0.125 + 0.125 - 2 * 0.5 * 0.125 + 0.25)
    assert one["tasks"] == _published(0.05, sd) == 1178
    code, text, _ = invoke(tmp_path, "plan", "--detect", "0.05")
    assert "assumptions (no earlier run given)" in text and "1178" in text


def test_plan_from_an_earlier_run_uses_its_variance_and_correlation(tmp_path: Path) -> None:
    """Two agents with known per-task rates over two repeats: the plan's variances, correlation
    and task counts equal the hand computation and statsmodels' NormalIndPower."""
    NormalIndPower = pytest.importorskip("statsmodels.stats.power").NormalIndPower
    np = pytest.importorskip("numpy")
    home = tmp_path / "L"
    home.mkdir()
    b = RunBuilder(run=RUN_1)
    b.started([task(t) for t in TASKS], agents=("alpha", "beta"), repeat=2)
    pattern_a = ["11", "10", "00", "11"] * 4
    pattern_b = ["11", "00", "01", "10"] * 4
    for agent, pats in (("alpha", pattern_a), ("beta", pattern_b)):
        for t, pat in zip(TASKS, pats, strict=False):
            for r, ch in enumerate(pat, start=1):
                b.attempt(t, agent=agent, repeat=r, hidden=(2, 0, 0) if ch == "1" else (0, 2, 0))
    b.finished()
    write(home, b)
    code, out, err = invoke(home, "plan", "--detect", "0.1", "--from", RUN_1, "--agents",
                            "alpha", "beta", "--json")
    assert code == 0, err
    p = json.loads(out)
    ra = np.array([p_.count("1") / 2 for p_ in pattern_a[:14]])
    rb = np.array([p_.count("1") / 2 for p_ in pattern_b[:14]])
    wa = np.mean([(p_.count("1") * (2 - p_.count("1"))) / 2 for p_ in pattern_a[:14]])
    wb = np.mean([(p_.count("1") * (2 - p_.count("1"))) / 2 for p_ in pattern_b[:14]])
    va = max(0.0, ra.var(ddof=1) - wa / 2)
    vb = max(0.0, rb.var(ddof=1) - wb / 2)
    rho = np.corrcoef(ra, rb)[0, 1]
    assert p["within_a"] == pytest.approx(wa) and p["within_b"] == pytest.approx(wb)
    assert p["var_a"] == pytest.approx(va) and p["var_b"] == pytest.approx(vb)
    assert p["correlation"] == pytest.approx(rho)
    for row in p["table"]:
        k = row["repeats"]
        sd = math.sqrt(va + vb - 2 * rho * math.sqrt(va * vb) + (wa + wb) / k)
        ref = NormalIndPower().solve_power(effect_size=0.1 / sd, alpha=0.05, power=0.8, ratio=0)
        assert row["tasks"] == math.ceil(ref - 1e-9), row


def test_plan_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    """--agents without --from, an unknown agent, a difference out of range: exit 2."""
    home = tmp_path / "L"
    home.mkdir()
    b = RunBuilder(run=RUN_1)
    b.started([task("t1")], agents=("alpha",))
    b.attempt("t1", agent="alpha")
    b.finished()
    write(home, b)
    for args in (("--detect", "0.05", "--agents", "a", "b"),
                 ("--detect", "0.05", "--from", RUN_1, "--agents", "alpha", "ghost"),
                 ("--detect", "1.5")):
        code, out, err = invoke(home, "plan", *args)
        assert code == 2 and "Traceback" not in out + err, (args, out, err)
