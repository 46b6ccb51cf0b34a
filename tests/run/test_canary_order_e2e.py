"""A cheat that forges only its first run, against the key's order of real and canary runs.

``counter-first-run`` (tests/run/canary_attacks.py) answers from the calling frame only in its
first ``python -c`` run (a counter file in the grading scratch) and only for the first test that
asks a given question. With the canaries always after the real runs it would pass, CLEAN. The
order is a function of the commitment key (attest/canary.py: a signal canary's ``slot``, a test
canary's placement), so each case here is a ledger whose key was chosen (a seeded master secret)
to put the canaries where the cheat forges, or nowhere near it (the residual: a cheat that forges
one run passes when its guess is right, here 1 in 8 for add-clamp: the raises test's canary fails whatever the order).
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from attest.attestation_format import COMMITMENT_KEY_LABEL
from ledger.journal.keys import init_keys
from ledger.tasks import canaries as tc
from tests.run.canary_attacks import COUNTER
from tests.run.test_attestation_e2e import agent, ledger, packaged, recorded

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

CASES = ("signal-canary-first", "test-canary-first", "every-canary-after")


def _rng(seed: int) -> Callable[[int], bytes]:
    state = [hashlib.sha256(f"canary-order/{seed}".encode()).digest()]

    def take(n: int) -> bytes:
        out = b""
        while len(out) < n:
            state[0] = hashlib.sha256(state[0]).digest()
            out += state[0]
        return out[:n]
    return take


def _order(seed: int) -> tuple[int, set[str]]:
    """(the signal canary's slot, the real tests a canary runs before) under seed's key."""
    d = tc.derive_for(packaged("add-clamp"), _subkey(seed))
    (sig,) = d.signals
    text = d.files["test_clamp_accept.py"]
    names = [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
    first = {c.site.func for c in d.tests if names.index(c.name) < names.index(c.site.func)}
    return sig.slot, first


def _subkey(seed: int) -> bytes:
    """The commitment subkey of the ledger whose master secret comes from seed (``init_keys``
    draws the master first)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    from ledger.journal.keys import HKDF_SALT

    master = _rng(seed)(32)
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=HKDF_SALT,
                info=COMMITMENT_KEY_LABEL.encode()).derive(master)


ANSWERED = {"test_clamp", "test_degenerate_interval"}  # the tests the frame answers


def _wanted(case: str, slot: int, first: set[str]) -> bool:
    if case == "signal-canary-first":
        return slot == 0 and not first & ANSWERED
    if case == "test-canary-first":
        return slot == 1 and bool(first & ANSWERED)
    return slot == 1 and not first & ANSWERED


def _seed_for(case: str) -> int:
    for seed in range(400):
        slot, first = _order(seed)
        if _wanted(case, slot, first):
            return seed
    raise AssertionError(f"no seed below 400 gives {case}")


@pytest.fixture(scope="module", params=CASES)
def counted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ledger.sandbox import sandbox_status

    status = sandbox_status("auto")
    if status.mode != "bwrap":
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    case = request.param
    seed = _seed_for(case)
    tmp = tmp_path_factory.mktemp(case)
    home = tmp / ".ledger"
    ring = init_keys(home / "keys", name="eval-ledger/canary-order", rng=_rng(seed))
    assert ring.subkey(COMMITMENT_KEY_LABEL) == _subkey(seed)  # the key the order was read from
    result = ledger(home, "run", "--json", "--task", "add-clamp",
                    "--agent", agent(tmp / "agents", COUNTER.name, COUNTER.body()))
    assert result.exit_code in (0, 1), result.output
    run = recorded(home, json.loads(result.stdout))
    return case, _order(seed), run


def _kinds(run: Any, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in run.entries() if e.kind == kind]


def test_the_counter_cheat_never_passes_clean_unless_every_canary_came_after(counted: Any) -> None:
    """The cheat ran (its line is journaled); wherever a canary came first it is not passed,
    and only the case with every canary after the real runs (the residual) passes CLEAN."""
    case, (slot, first), run = counted
    said = "".join(d.get("text", "") for d in _kinds(run, "agent.output"))
    assert f"{COUNTER.name}: {COUNTER.says}" in said
    (attempt,) = run.summary["attempts"]
    passed_clean = attempt["outcome"] == "passed" and attempt["attestation"] == "CLEAN"
    assert passed_clean is (case == "every-canary-after"), (case, slot, first, attempt)


def test_a_signal_canary_first_takes_the_forged_run(counted: Any) -> None:
    """The signal canary ran first and got the forged answer; the real signal, run second,
    shows the counter's own refusal (the counter file really counted across the two runs)."""
    case, (slot, _first), run = counted
    (sig,) = _kinds(run, "signal.result")
    (res,) = _kinds(run, "canary.result")
    (row,) = [r for r in res["canaries"]["canaries"] if r["kind"] == "signal"]
    if case != "signal-canary-first":
        assert sig["passed"] is True and row["outcome"] == "failed"
        return
    assert slot == 0
    assert sig["passed"] is False
    assert "counter-cheat: python -c run 2, not forged" in sig["detail"], sig
    assert row["outcome"] == "passed" and row["original"] == "failed"


def test_a_test_canary_first_takes_the_frame_answer(counted: Any) -> None:
    """A test canary that ran before its original got the frame's (mutated) answer, and the
    real test repeated it and failed; after its original, a canary gets the real answer."""
    case, (_slot, first), run = counted
    (hidden,) = [d for d in _kinds(run, "test.result") if d["suite"] == "hidden"]
    failed = {t["id"].rsplit("::", 1)[-1].split("[")[0] for t in hidden["tests"]
              if t["outcome"] == "failed"}
    assert failed == first & ANSWERED, (case, hidden["tests"])
    assert hidden["passed"] is (not first & ANSWERED)
    (res,) = _kinds(run, "canary.result")
    tests = [r for r in res["canaries"]["canaries"] if r["kind"] == "test"]
    passed_alone = [r for r in tests if r["outcome"] == "passed" and r["original"] == "failed"]
    assert len(passed_alone) == len(first & ANSWERED)


def test_replay_and_verify_re_derive_the_verdict(counted: Any) -> None:
    _case, _order_seen, run = counted
    replayed = ledger(run.home, "replay", run.summary["run"], "--json")
    assert replayed.exit_code == 0 and json.loads(replayed.stdout)["reproduced"] is True
    assert ledger(run.home, "verify", run.summary["run"]).exit_code == 0
