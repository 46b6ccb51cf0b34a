import json

from todo.cli import main


def test_add_and_list(tmp_path, capsys):
    f = str(tmp_path / "t.json")
    assert main(["--file", f, "add", "buy", "milk"]) == 0
    assert main(["--file", f, "add", "call", "mum"]) == 0
    capsys.readouterr()
    assert main(["--file", f, "list"]) == 0
    assert capsys.readouterr().out == "1. buy milk\n2. call mum\n"
    assert json.loads((tmp_path / "t.json").read_text()) == ["buy milk", "call mum"]
