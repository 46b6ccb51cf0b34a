"""The golden task loader: format, errors that name the file, hashing, tiers and overrides."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ledger.errors import NotFound, TaskError, UsageError
from ledger.tasks.loader import (
    available_tiers,
    load_repo_history,
    load_task,
    load_tasks,
    load_tier,
    packaged_root,
    task_hash,
    tier_source,
)
from ledger.tasks.model import Signal
from tests.tasks.helpers import make_task


def test_minimal_task_loads_with_every_field(tmp_path: Path) -> None:
    """A valid folder loads into a Task with parsed signals, budgets, defaults and the tier from its parent."""
    folder = make_task(tmp_path / "standard", front={"max_cost_usd": 0.5, "network_allowlist": ["pypi.org:443"]})
    task = load_task(folder)
    assert task.id == "t-add" and task.tier == "standard" and task.title == "Fix add"
    assert task.prompt == "Fix `add` in calc.py so that it returns the sum of its arguments."
    assert task.max_duration_s == 60.0 and task.max_cost_usd == 0.5 and task.max_tokens == 200_000
    assert task.signals == (
        Signal(kind="command", command=("python", "-c", "from calc import add; assert add(1, 1) == 2"), expect_exit=0),
        Signal(kind="file_contains", path="calc.py", pattern=r"a \+ b"),
    )
    assert task.network_allowlist == ("pypi.org:443",)
    assert task.regression_command == ("python", "-m", "pytest", "-q", "tests")
    assert task.hidden_test_command == ("python", "-m", "pytest", "-q", "tests_hidden")
    assert task.root == folder.resolve() and len(task.hash) == 64


def test_every_signal_form_parses(tmp_path: Path) -> None:
    """Command lists, shell strings, path_exists and file_contains all load as Signals."""
    signals = [
        {"command": "test -f calc.py", "expect_exit": 0},
        {"command": ["false"], "expect_exit": 1},
        {"path_exists": "calc.py"},
        {"file_contains": {"path": "calc.py", "pattern": "^def add"}},
    ]
    task = load_task(make_task(tmp_path / "smoke", front={"completion_signals": signals}))
    assert [s.kind for s in task.signals] == ["command", "command", "path_exists", "file_contains"]
    assert task.signals[0].command == "test -f calc.py"
    assert task.signals[1].command == ("false",) and task.signals[1].expect_exit == 1
    assert task.signals[2].path == "calc.py"


@pytest.mark.parametrize(
    "signal, needle",
    [
        ("agent prints the exact string 'hello world' to stdout", "hello world"),
        ("the tests pass", "the tests pass"),
        ({"description": "tests pass"}, "description"),
        ({"command": "pytest", "expect_exit": 0, "timeout": 5}, "timeout"),
        ({"path_exists": "/etc/passwd"}, "/etc/passwd"),
        ({"path_exists": "../outside"}, "../outside"),
        ({"file_contains": {"path": "calc.py", "pattern": "("}}, "bad regex"),
        ({"file_contains": {"path": "calc.py"}}, "file_contains"),
        ({"command": [], "expect_exit": 0}, "command"),
        ({"command": "ls", "expect_exit": True}, "expect_exit"),
        (["python", "-c", "pass"], "not an executable signal"),
    ],
)
def test_unexecutable_signal_is_an_error_naming_file_and_signal(tmp_path: Path, signal: object, needle: str) -> None:
    """A signal that cannot be executed (free text, unknown keys, escaping paths) fails the load, naming file and signal."""
    folder = make_task(tmp_path / "smoke", front={"completion_signals": [signal]})
    with pytest.raises(TaskError) as info:
        load_task(folder)
    message = str(info.value)
    assert str(folder / "task.md") in message
    assert "completion_signals[0]" in message
    assert needle in message


def test_bernstein_task_with_free_text_signals_is_rejected(tmp_path: Path) -> None:
    """A Bernstein golden task whose completion_signals are English sentences does not load."""
    head = (
        "id: t-add\ntitle: Append a CHANGELOG entry\nrole: docs\nexpected_files_modified:\n  - CHANGELOG.md\n"
        "expected_test_outcomes: {}\ncompletion_signals:\n"
        "  - \"CHANGELOG.md contains a new bullet under the '## Unreleased' section\"\n"
        "max_cost_usd: 0.10\nmax_duration_s: 120\nowned_files:\n  - CHANGELOG.md\n"
    )
    folder = make_task(tmp_path / "smoke", raw_frontmatter=head)
    with pytest.raises(TaskError, match="CHANGELOG.md contains a new bullet"):
        load_task(folder)


def test_bernstein_fields_load(tmp_path: Path) -> None:
    """Bernstein's fields load: role, owned/expected files, boolean expected_test_outcomes, description."""
    front = {
        "role": "backend",
        "owned_files": ["calc.py"],
        "expected_test_outcomes": {"pytest tests/test_add.py": True, "pytest tests/test_old.py": False, "t3": "passed"},
        "description": "unused when the body is present",
    }
    task = load_task(make_task(tmp_path / "smoke", front=front))
    assert task.role == "backend" and task.owned_files == ("calc.py",)
    assert task.expected_test_outcomes == {"pytest tests/test_add.py": "pass", "pytest tests/test_old.py": "fail", "t3": "pass"}
    assert task.prompt.startswith("Fix `add`")


def test_description_is_the_prompt_when_body_is_empty(tmp_path: Path) -> None:
    """With an empty markdown body, Bernstein's description becomes the prompt; with neither, it is an error."""
    task = load_task(make_task(tmp_path / "a" / "smoke", front={"description": "Make add add."}, prompt=""))
    assert task.prompt == "Make add add."
    with pytest.raises(TaskError, match="prompt"):
        load_task(make_task(tmp_path / "b" / "smoke", prompt=""))


def test_unknown_frontmatter_key_is_an_error_with_a_hint(tmp_path: Path) -> None:
    """A misspelt key is refused, named, and the closest real key is suggested."""
    folder = make_task(tmp_path / "smoke", front={"complettion_signals": []})
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert "complettion_signals" in str(info.value)
    assert "completion_signals" in str(info.value)
    assert str(folder / "task.md") in str(info.value)


@pytest.mark.parametrize("missing", ["repo", "tests", "solution"])
def test_missing_folder_is_an_error(tmp_path: Path, missing: str) -> None:
    """A task without repo/, tests/ or solution/ does not load, and the error names the folder."""
    folder = make_task(tmp_path / "smoke")
    shutil.rmtree(folder / missing)
    with pytest.raises(TaskError, match=f"missing {missing}/"):
        load_task(folder)


def test_empty_hidden_tests_is_an_error(tmp_path: Path) -> None:
    """tests/ must hold at least one file: a task with no hidden tests proves nothing."""
    folder = make_task(tmp_path / "smoke")
    (folder / "tests" / "test_add_hidden.py").unlink()
    with pytest.raises(TaskError, match="no hidden tests"):
        load_task(folder)


def test_bad_yaml_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    """Unparseable frontmatter names the file and the line of the problem."""
    folder = make_task(tmp_path / "smoke", raw_frontmatter="id: t-add\ntitle: [unclosed\n")
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert str(folder / "task.md") in str(info.value)
    assert "invalid YAML" in str(info.value) and "line" in str(info.value)


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    """A key given twice is refused instead of the last one silently winning."""
    folder = make_task(tmp_path / "smoke", raw_frontmatter="id: t-add\ntitle: A\ntitle: B\n")
    with pytest.raises(TaskError, match="duplicate key 'title'"):
        load_task(folder)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("no frontmatter at all\n", "missing YAML frontmatter"),
        ("---\nid: t-add\ntitle: x\n", "not closed"),
        ("---\n- a\n- b\n---\nbody\n", "must be a YAML map"),
    ],
)
def test_missing_or_malformed_frontmatter(tmp_path: Path, text: str, needle: str) -> None:
    """task.md without a closed YAML map at the top is an error naming the file."""
    folder = make_task(tmp_path / "smoke")
    (folder / "task.md").write_text(text, encoding="utf-8")
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert needle in str(info.value) and str(folder / "task.md") in str(info.value)


def test_missing_task_md(tmp_path: Path) -> None:
    """A folder without task.md is not a task."""
    folder = make_task(tmp_path / "smoke")
    (folder / "task.md").unlink()
    with pytest.raises(TaskError, match="no task.md"):
        load_task(folder)


@pytest.mark.parametrize(
    "front, needle",
    [
        ({"id": "other-id"}, "differs from the folder name"),
        ({"max_duration_s": -1}, "out of range"),
        ({"max_duration_s": True}, "expected a number"),
        ({"max_tokens": 1.5}, "expected an integer"),
        ({"max_cost_usd": float("nan")}, "out of range"),
        ({"tier": "stretch"}, "lives in tier 'smoke'"),
        ({"owned_files": ["../x.py"]}, "inside the worktree"),
        ({"hidden": ["not", "a", "map"]}, "hidden must be a map"),
        ({"expected_test_outcomes": {"t": "maybe"}}, "pass/fail"),
        ({"regression_command": []}, "regression_command"),
        ({"hidden_tests_dir": "tests"}, "hidden_tests_dir"),
        ({"title": ""}, "title"),
    ],
)
def test_bad_field_values(tmp_path: Path, front: dict[str, object], needle: str) -> None:
    """Wrongly typed or out-of-range frontmatter values are errors, not defaults."""
    folder = make_task(tmp_path / "smoke", front=front)
    with pytest.raises(TaskError, match=needle):
        load_tier_of(folder)


def load_tier_of(folder: Path) -> object:
    return load_task(folder, tier=folder.parent.name)


def test_missing_title_is_an_error(tmp_path: Path) -> None:
    """title is required."""
    with pytest.raises(TaskError, match="missing frontmatter key.*title"):
        load_task(make_task(tmp_path / "smoke", drop=("title",)))


def test_symlink_in_task_folder_is_refused(tmp_path: Path) -> None:
    """A symlink could point anywhere (even at ground truth), so a task folder may not contain one."""
    folder = make_task(tmp_path / "smoke")
    (folder / "repo" / "link.py").symlink_to(folder / "solution" / "calc.py")
    with pytest.raises(TaskError, match="symlink"):
        load_task(folder)


def test_demo_steps_are_validated(tmp_path: Path) -> None:
    """demo.yaml loads as steps; unknown actions, escaping paths and hidden-test paths are errors."""
    good = "- read: calc.py\n- replace: calc.py\n  old: a - b\n  new: a + b\n- run: [python, -m, pytest, -q, tests]\n- write: notes.txt\n  content: hi\n- say: done\n"
    task = load_task(make_task(tmp_path / "a" / "smoke", files={"demo.yaml": good}))
    assert task.demo[0] == {"read": "calc.py"}
    assert task.demo[2] == {"run": ["python", "-m", "pytest", "-q", "tests"]}
    assert task.demo[-1] == {"say": "done"}
    for n, (bad, needle) in enumerate(
        [
            ("- delete: calc.py\n", "needs exactly one of"),
            ("- read: ../solution/calc.py\n", "inside the worktree"),
            ("- read: tests_hidden/test_add_hidden.py\n", "hidden tests"),
            ("- replace: calc.py\n  old: a\n", "takes keys"),
            ("[]\n", "non-empty list"),
            ("- say: [1, 2]\n", "say takes a string"),
        ]
    ):
        folder = make_task(tmp_path / f"b{n}" / "smoke", files={"demo.yaml": bad})
        with pytest.raises(TaskError, match=needle):
            load_task(folder)


def test_repo_history_is_validated_and_loadable(tmp_path: Path) -> None:
    """repo_history.yaml is a list of {message, files}; it loads as commits, and a malformed one fails the load."""
    history = [{"message": "start", "files": {"calc.py": "x = 1\n"}}, {"message": "drop", "files": {"calc.py": None}}]
    folder = make_task(tmp_path / "a" / "smoke", files={"repo_history.yaml": yaml.safe_dump(history)})
    commits = load_repo_history(load_task(folder))
    assert [c.message for c in commits] == ["start", "drop"]
    assert commits[1].files == {"calc.py": None}
    bad = yaml.safe_dump([{"message": "m", "files": {"/etc/x": "y"}}])
    with pytest.raises(TaskError, match="repo_history.yaml"):
        load_task(make_task(tmp_path / "b" / "smoke", files={"repo_history.yaml": bad}))


# --------------------------------------------------------------------------- hash


def test_hash_is_stable_and_changes_with_any_byte(tmp_path: Path) -> None:
    """The hash is deterministic and changes when one byte of any file (repo, tests, solution, task.md) changes."""
    folder = make_task(tmp_path / "smoke")
    base = task_hash(folder)
    assert task_hash(folder) == base == load_task(folder).hash
    for rel in ("repo/calc.py", "tests/test_add_hidden.py", "solution/calc.py", "task.md"):
        path = folder / rel
        original = path.read_bytes()
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        assert task_hash(folder) != base, rel
        path.write_bytes(original)
    assert task_hash(folder) == base


def test_hash_covers_paths_and_ignores_caches(tmp_path: Path) -> None:
    """Renaming a file changes the hash; __pycache__ and .pyc files do not."""
    folder = make_task(tmp_path / "smoke")
    base = task_hash(folder)
    (folder / "repo" / "__pycache__").mkdir()
    (folder / "repo" / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\x00junk")
    (folder / "repo" / ".pytest_cache").mkdir()
    (folder / "repo" / ".pytest_cache" / "x").write_text("y")
    assert task_hash(folder) == base
    (folder / "repo" / "tests" / "test_neg.py").rename(folder / "repo" / "tests" / "test_neg2.py")
    assert task_hash(folder) != base


def test_hash_is_length_prefixed(tmp_path: Path) -> None:
    """Moving bytes between a path and its content (a/bc vs ab/c style) cannot collide."""
    one, two = tmp_path / "one", tmp_path / "two"
    (one / "a").mkdir(parents=True)
    (one / "a" / "b").write_bytes(b"cd")
    (two / "a").mkdir(parents=True)
    (two / "a" / "bc").write_bytes(b"d")
    assert task_hash(one) != task_hash(two)


# --------------------------------------------------------------------------- tiers and overrides


def test_packaged_tier_counts() -> None:
    """The wheel ships at least 5 smoke, 10 standard, 5 stretch and 5 adversarial tasks, with unique ids."""
    assert packaged_root().is_dir()
    counts = {tier: len(load_tier(tier)) for tier in ("smoke", "standard", "stretch", "adversarial")}
    assert counts["smoke"] >= 5 and counts["standard"] >= 10
    assert counts["stretch"] >= 5 and counts["adversarial"] >= 5
    ids = [t.id for t in load_tasks()]
    assert len(ids) == len(set(ids)) == sum(counts.values())


def test_overrides_replace_the_packaged_tier(tmp_path: Path) -> None:
    """A non-empty <overrides>/<tier>/ replaces that tier only; other tiers stay packaged."""
    overrides = tmp_path / "golden"
    make_task(overrides / "smoke", "op-task")
    smoke = load_tier("smoke", overrides=overrides)
    assert [t.id for t in smoke] == ["op-task"]
    assert tier_source("smoke", overrides=overrides) == overrides / "smoke"
    assert len(load_tier("standard", overrides=overrides)) >= 10
    assert tier_source("standard", overrides=overrides) == packaged_root() / "standard"


def test_empty_override_dir_keeps_packaged(tmp_path: Path) -> None:
    """An existing but empty override tier folder does not hide the packaged tasks."""
    overrides = tmp_path / "golden"
    (overrides / "smoke").mkdir(parents=True)
    (overrides / "smoke" / "README.txt").write_text("not a task")
    assert len(load_tier("smoke", overrides=overrides)) >= 5


def test_broken_override_task_is_an_error_not_skipped(tmp_path: Path) -> None:
    """A broken operator task fails the load of its tier instead of silently vanishing."""
    overrides = tmp_path / "golden"
    make_task(overrides / "smoke", "good")
    make_task(overrides / "smoke", "bad", front={"completion_signals": ["it works"]})
    with pytest.raises(TaskError, match="it works"):
        load_tier("smoke", overrides=overrides)


def test_operator_extra_tier(tmp_path: Path) -> None:
    """An operator may add a tier of their own; it is listed after the standard ones and loads."""
    overrides = tmp_path / "golden"
    make_task(overrides / "inhouse", "ours")
    assert available_tiers(overrides=overrides)[-1] == "inhouse"
    assert [t.tier for t in load_tier("inhouse", overrides=overrides)] == ["inhouse"]


def test_unknown_tier_is_not_found() -> None:
    """An unknown tier is a NotFound that lists the real tiers."""
    with pytest.raises(NotFound, match="smoke"):
        load_tier("smokey")


def test_unknown_id_lists_close_names() -> None:
    """An unknown task id is a NotFound (a UsageError: exit 2) that suggests the closest ids."""
    with pytest.raises(NotFound) as info:
        load_tasks(ids=["add-clmp"])
    assert isinstance(info.value, UsageError)
    assert "add-clamp" in str(info.value)


def test_ids_filter_and_order() -> None:
    """Selecting ids returns just those tasks, in tier then id order."""
    tasks = load_tasks(ids=["retry-backoff", "add-clamp"])
    assert [t.id for t in tasks] == ["add-clamp", "retry-backoff"]
    assert [t.tier for t in tasks] == ["smoke", "standard"]


def test_duplicate_id_across_tiers_is_an_error(tmp_path: Path) -> None:
    """The same id in two tiers is ambiguous and refused."""
    overrides = tmp_path / "golden"
    make_task(overrides / "smoke", "twin")
    make_task(overrides / "standard", "twin")
    with pytest.raises(TaskError, match="appears twice"):
        load_tasks(["smoke", "standard"], overrides=overrides)


def test_hidden_values_must_be_plain_data_and_are_not_echoed(tmp_path: Path) -> None:
    """A YAML date (or other non-JSON value) in hidden fields is refused without printing the value."""
    head = "id: t-add\ntitle: x\nhidden:\n  secret_day: 2031-05-17\n"
    with pytest.raises(TaskError) as info:
        load_task(make_task(tmp_path / "smoke", raw_frontmatter=head))
    assert "hidden values" in str(info.value) and "2031" not in str(info.value)


def test_tier_comes_from_the_parent_folder(tmp_path: Path) -> None:
    """Loaded on its own (as a run worker does), a task takes its tier from the folder it lives in."""
    assert load_task(make_task(tmp_path / "inhouse")).tier == "inhouse"
    assert load_task(make_task(tmp_path / "x", front={"tier": "stretch"})).tier == "stretch"
