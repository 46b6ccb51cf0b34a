"""ledger/argv.py: the one parser of a command as a person writes it, and each caller's message."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.argv import CommandError, split_command
from ledger.errors import MalformedInput, TaskError, UsageError


@pytest.mark.parametrize(("value", "argv"), [
    ("pytest -q 'a b'", ("pytest", "-q", "a b")),
    (["python", "-c", "print(1) ; x"], ("python", "-c", "print(1) ; x")),
    (("sh", "-c", ""), ("sh", "-c", "")),
])
def test_a_string_is_split_like_a_shell_and_a_list_is_kept(value: Any, argv: tuple[str, ...]) -> None:
    assert split_command(value) == argv


@pytest.mark.parametrize(("value", "message"), [
    ("", "empty command"),
    ("   ", "empty command"),
    ([], "empty command"),
    ([""], "empty command"),
    ("pytest 'unclosed", "cannot split command \"pytest 'unclosed\": No closing quotation"),
    (3, "command must be a string or a list of strings"),
    (None, "command must be a string or a list of strings"),
    (["pytest", 3], "command must be a string or a list of strings"),
    ({"run": "x"}, "command must be a string or a list of strings"),
])
def test_what_is_not_a_command_says_why(value: Any, message: str) -> None:
    with pytest.raises(CommandError) as err:
        split_command(value)
    assert str(err.value) == message


def test_each_caller_says_where_in_its_own_error_class() -> None:
    """The task format, ledger.toml, an [agents] table given to the registry, cmd: and --test-cmd
    all refuse a bad command through split_command, each with its place and its error class."""
    from ledger.agents import resolve_agent
    from ledger.run.config import _parse_agent
    from ledger.tasks.fields import _command
    from ledger.tasks.mine import parse_test_command

    with pytest.raises(TaskError, match=r"^task\.yaml: test_command: empty command$"):
        _command([], "task.yaml: test_command")
    with pytest.raises(MalformedInput, match=r"^ledger\.toml: \[agents\.x\]: command must be a "):
        _parse_agent("x", {"command": 3}, "ledger.toml")
    with pytest.raises(UsageError, match=r"^\[agents\.bad\]: cannot split command"):
        resolve_agent("bad", config={"agents": {"bad": {"command": "run 'it"}}})
    with pytest.raises(UsageError, match=r"^cmd:a 'b: cannot split command"):
        resolve_agent("cmd:a 'b")
    with pytest.raises(UsageError, match=r"^cmd: needs a program"):
        resolve_agent("cmd:  ")
    with pytest.raises(UsageError, match=r"^--test-cmd: empty command$"):
        parse_test_command(" ")
    assert resolve_agent("cmd:/bin/echo 'a b'").invocation  # a good one still resolves
