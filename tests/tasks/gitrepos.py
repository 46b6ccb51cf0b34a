"""Small real git repositories for the mining and import tests, built commit by commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    out = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str | None], *, date: str | None = None) -> str:
    """Write (or delete, for None) files and commit them; returns the commit id."""
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD")


def init(repo: Path) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


CALC_START = "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
TEST_NEG = "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n"
TEST_ADD = TEST_NEG + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_ADD = TEST_ADD.replace("from calc import neg", "from calc import add, neg")
# A test that passes before its commit's source change: the commit fixes nothing it tests.
TEST_NEG_ZERO = TEST_ADD + "\n\ndef test_neg_zero():\n    assert neg(0) == 0\n"
# Flaky: passes on odd runs in a folder, fails on even ones (a counter file beside it).
TEST_MUL_FLAKY = '''from pathlib import Path

from calc import mul


def test_mul():
    counter = Path(__file__).with_name("runs.txt")
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    assert mul(2, 3) == 6 and n % 2 == 1
'''


def fixture_repo(root: Path) -> dict[str, str]:
    """The mining fixture: returns {label: commit id}.

    root      calc.add is wrong; tests cover neg only (root commit: rejected, no parent)
    fix       fixes add and adds test_add (accepted: test_add FAIL_TO_PASS, test_neg PASS_TO_PASS)
    passing   changes the README and adds test_neg_zero, which already passes (rejected)
    flaky     adds mul() and a flaky test of it (rejected: flaky)
    refactor  renames a local in calc.py, no test change (rejected: no test changes)
    testsonly adds a comment to the tests only (rejected: only test changes)
    """
    repo = init(root)
    ids = {}
    ids["root"] = commit(repo, "Start calc", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG,
                                             "README.md": "calc\n"})
    ids["fix"] = commit(repo, "Fix add() returning the difference\n\nadd(a, b) subtracted its arguments; "
                        "it must return their sum.", {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_ADD})
    ids["passing"] = commit(repo, "Document neg and test zero", {"README.md": "calc: add and neg\n",
                                                                  "tests/test_calc.py": TEST_NEG_ZERO})
    ids["flaky"] = commit(repo, "Add mul()", {"calc.py": CALC_FIXED + "\n\ndef mul(a, b):\n    return a * b\n",
                                              "tests/test_mul.py": TEST_MUL_FLAKY})
    ids["refactor"] = commit(repo, "Refactor neg", {
        "calc.py": CALC_FIXED.replace("return -a", "result = -a\n    return result")
        + "\n\ndef mul(a, b):\n    return a * b\n"})
    ids["testsonly"] = commit(repo, "Comment the tests", {"tests/test_calc.py": "# calc tests\n" + TEST_NEG_ZERO})
    return ids
