"""Canary derivation (attest/canary.py): sound mutants, stealthy names, keyed choice, commitment."""

from __future__ import annotations

import ast

import pytest

from attest import canary as cn
from ledger.errors import MalformedInput
from ledger.tasks.model import Signal

KEY = b"k" * 32
TESTS = '''import pytest

from mathx import clamp


@pytest.mark.parametrize(
    "value, low, high, expected",
    [(5, 0, 3, 3), (-2, 0, 3, 0)],
)
def test_clamp(value, low, high, expected):
    assert clamp(value, low, high) == expected


def test_degenerate_interval():
    assert clamp(10, 4, 4) == 4


def test_low_above_high_is_an_error():
    with pytest.raises(ValueError):
        clamp(1, 5, 2)
'''
SIGNAL = Signal(kind="command", command=("python", "-c", "from mathx import clamp; assert clamp(5, 0, 3) == 3"))


def _derive(key: bytes = KEY, **kw: object) -> cn.Derived:
    return cn.derive([("test_clamp_accept.py", TESTS)], [SIGNAL], key=key, task_hash="h" * 64, **kw)


def test_one_canary_per_test_function_and_one_signal() -> None:
    d = _derive()
    assert sorted(c.site.func for c in d.tests) == [
        "test_clamp", "test_degenerate_interval", "test_low_above_high_is_an_error"]
    assert {c.site.kind for c in d.tests} == {"param", "const", "raises"}
    assert [c.code for c in d.signals] == ["from mathx import clamp; assert clamp(5, 0, 3) == 4"]


def test_mutants_change_the_expected_value_only() -> None:
    d = _derive()
    by_kind = {c.site.kind: c.code for c in d.tests}
    assert "assert clamp(10, 4, 4) == 5" in by_kind["const"]
    assert "(5, 0, 3, 4)" in by_kind["param"] or "(-2, 0, 3, 1)" in by_kind["param"]
    assert "[(5, 0, 3, 3), (-2, 0, 3, 0)]" not in by_kind["param"]  # one case kept
    assert "pytest.raises" not in by_kind["raises"] and "clamp(1, 5, 2)" in by_kind["raises"]
    text = d.files["test_clamp_accept.py"]
    for chunk in TESTS.split("\n\n\n"):  # the real tests are all kept, as they were
        assert chunk.strip() in text
    names = {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)}
    assert {"test_clamp", "test_degenerate_interval", "test_low_above_high_is_an_error"} <= names
    assert len(names) == 6


def test_names_look_like_the_real_ones() -> None:
    for seed in range(8):
        d = _derive(bytes([seed]) * 32)
        for c in d.tests:
            assert c.name.startswith("test_") and "canary" not in c.name
            words = set(c.name.split("_")[1:])
            assert words <= {"clamp", "degenerate", "interval", "low", "above", "high", "error"}
            assert c.name not in ("test_clamp", "test_degenerate_interval",
                                  "test_low_above_high_is_an_error")


def test_choice_is_a_function_of_key_and_task() -> None:
    assert _derive().canaries == _derive().canaries
    other = {tuple(c.name for c in _derive(bytes([i]) * 32).tests) for i in range(6)}
    assert len(other) > 1
    again = cn.derive([("test_clamp_accept.py", TESTS)], [SIGNAL], key=KEY, task_hash="g" * 64)
    assert [c.item for c in again.canaries] != [c.item for c in _derive().canaries]


def test_flip_only_without_a_stronger_site() -> None:
    text = "def test_has():\n    assert 'a' in make()\n\n\ndef test_truth():\n    assert ok()\n"
    d = cn.derive([("test_x.py", text)], [], key=KEY, task_hash="h")
    codes = sorted(c.code for c in d.tests)
    assert any("'a' not in make()" in c for c in codes)
    assert any("assert not (ok())" in c for c in codes)


def test_no_site_gives_a_reason() -> None:
    d = cn.derive([("test_x.py", "def test_a():\n    check()\n")], [], key=KEY, task_hash="h")
    assert d.canaries == () and d.reason and "no test function" in d.reason


def test_commitment_holds_no_plaintext_and_detects_tampering() -> None:
    d = _derive()
    data = cn.commit(d)
    assert cn.check_commitment(data) == data
    blob = repr(data)
    for c in d.canaries:
        assert c.name not in blob and c.code not in blob
    assert data["tests"] == 3 and data["signals"] == 1 and len(data["items"]) == 4
    bad = {**data, "tests": 2, "signals": 2}
    with pytest.raises(MalformedInput):
        cn.check_commitment(bad)
    with pytest.raises(MalformedInput):
        cn.check_commitment({**data, "items": data["items"][:-1]})


def test_result_counts_a_canary_that_passed_with_its_original() -> None:
    d = _derive()
    const = next(c for c in d.tests if c.site.kind == "const")
    raises = next(c for c in d.tests if c.site.kind == "raises")
    sig = d.signals[0]
    observed = {c.key: ("failed", "passed") for c in d.canaries}
    observed[const.key] = ("passed", "passed")  # both contradicting asserts held: a cheat
    observed[raises.key] = ("passed", "failed")  # forgot to raise: wrong, not a cheat
    res = cn.result(d, observed, exit_code=1, session="reporter")
    assert res["passed"] == 1
    passed, problem = cn.passed_items(cn.commit(d), res)
    assert passed == [const.item] and problem is None
    assert {r["item"]: r["original"] for r in res["canaries"]}[sig.item] == "passed"


def test_a_session_that_exits_zero_without_reports_claims_every_canary() -> None:
    d = _derive()
    silent = cn.result(d, {}, exit_code=0, session="reporter")
    tests = [r for r in silent["canaries"] if r["kind"] == "test"]
    assert {(r["outcome"], r["original"], r["via"]) for r in tests} == {
        ("passed", "passed", "exit-code")}
    assert silent["passed"] == 3
    quiet = cn.result(d, {}, exit_code=2, session="reporter")
    assert quiet["passed"] == 0 and {r["outcome"] for r in quiet["canaries"]} == {"missing"}


def test_a_result_that_drops_a_committed_canary_is_a_problem() -> None:
    d = _derive()
    res = cn.result(d, {}, exit_code=1, session="reporter")
    short = {**res, "canaries": res["canaries"][1:]}
    assert cn.passed_items(cn.commit(d), short)[1] is not None
    odd = {**res, "canaries": [{**r, "original": "maybe"} for r in res["canaries"]]}
    assert cn.passed_items(cn.commit(d), odd)[1] == "canary result has an unknown outcome"


def test_claimed_is_passed_when_either_side_says_so() -> None:
    assert cn.claimed("failed", "passed") == "passed"
    assert cn.claimed("passed", "failed") == "passed"
    assert cn.claimed("failed", "failed") == "failed"


def _keys(n: int) -> list[bytes]:
    return [bytes([k]) * 32 for k in range(n)]


def _runs_before_original(d: cn.Derived) -> dict[str, bool]:
    """Per test canary: whether it is defined (so run) before the real test it copies."""
    order = [n.name for n in ast.parse(d.files["test_clamp_accept.py"]).body
             if isinstance(n, ast.FunctionDef)]
    return {c.site.func: order.index(c.name) < order.index(c.site.func) for c in d.tests}


def test_a_test_canary_runs_before_or_after_its_original_by_the_key() -> None:
    """Over a few keys every canary comes both before and after the test it copies, and the
    copy placed first still collects and imports (every name its decorators use is defined)."""
    seen: dict[str, set[bool]] = {}
    for key in _keys(16):
        d = _derive(key)
        compile(d.files["test_clamp_accept.py"], "t.py", "exec")
        assert d.files["test_clamp_accept.py"].index("import pytest") == 0
        for func, first in _runs_before_original(d).items():
            seen.setdefault(func, set()).add(first)
    assert seen == {f: {True, False} for f in
                    ("test_clamp", "test_degenerate_interval", "test_low_above_high_is_an_error")}


def test_a_test_canary_is_never_placed_above_the_names_its_decorators_use() -> None:
    """A parametrize that reads a module constant: a copy placed before its original still
    comes after the constant."""
    text = ("import pytest\n\nfrom mathx import clamp\n\n\ndef test_first():\n"
            "    assert clamp(1, 0, 2) == 1\n\n\nCASES = [(5, 0, 3, 3)]\n\n\n"
            "@pytest.mark.parametrize('value, low, high, expected', CASES)\n"
            "def test_cases(value, low, high, expected):\n"
            "    assert clamp(value, low, high) == expected\n")
    for key in _keys(16):
        d = cn.derive([("test_c.py", text)], [], key=key, task_hash="h" * 64)
        new = d.files["test_c.py"]
        for c in d.tests:
            if c.site.func == "test_cases":
                assert new.index("CASES = ") < new.index(f"def {c.name}(")


def test_a_signal_canary_runs_before_or_after_the_real_signal_by_the_key() -> None:
    """The slot (its turn among the real signals) is a function of the key: with one signal
    both turns occur, and the same key gives the same slot."""
    slots = {_derive(key).signals[0].slot for key in _keys(16)}
    assert slots == {0, 1}
    assert _derive(KEY).signals[0].slot == _derive(KEY).signals[0].slot
    two = cn.derive([], [SIGNAL, SIGNAL], key=KEY, task_hash="h" * 64)
    assert all(0 <= c.slot <= 2 for c in two.signals)


def test_a_command_canary_run_comes_before_or_after_the_real_run_by_the_key() -> None:
    """A task graded by its own command: the canary run's turn is a function of the key (same
    key, same turn), and over a few keys it is both first and second."""
    turns = [cn.command_first(_derive(key)) for key in _keys(16)]
    assert set(turns) == {True, False}
    assert all(cn.command_first(_derive(key)) == t for key, t in zip(_keys(16), turns, strict=True))
    assert cn.command_first(cn.Derived((), {}, 0, "none")) is False


def test_one_canary_alone_keeps_only_its_copy_in_its_file() -> None:
    """``tasks validate`` runs each command canary alone: its file then holds the original tests
    and that one copy, the other copies taken out."""
    from ledger.tasks.canaries import alone

    d = _derive(every=True)
    for c in d.tests:
        text = alone(d, c).files[c.file]
        compile(text, "t.py", "exec")
        names = {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)}
        assert names == {"test_clamp", "test_degenerate_interval", "test_low_above_high_is_an_error",
                         c.name}, (c.name, names)
