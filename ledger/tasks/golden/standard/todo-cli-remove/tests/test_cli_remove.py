import json

import pytest

from todo.cli import main


def _seed(tmp_path, items):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(items), encoding="utf-8")
    return f


def test_remove_middle(tmp_path, capsys):
    f = _seed(tmp_path, ["a", "b", "c"])
    assert main(["--file", str(f), "remove", "2"]) == 0
    assert capsys.readouterr().out == "removed: b\n"
    assert json.loads(f.read_text()) == ["a", "c"]


@pytest.mark.parametrize("n", ["0", "4", "-1"])
def test_remove_missing(tmp_path, capsys, n):
    f = _seed(tmp_path, ["a", "b", "c"])
    assert main(["--file", str(f), "remove", n]) == 1
    err = capsys.readouterr().err
    assert f"error: no item {n}" in err
    assert json.loads(f.read_text()) == ["a", "b", "c"]


def test_remove_not_a_number(tmp_path):
    f = _seed(tmp_path, ["a"])
    with pytest.raises(SystemExit) as exc:
        main(["--file", str(f), "remove", "first"])
    assert exc.value.code == 2
