import pytest

from wc_tool.cli import main


def test_counts(tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text("one two\nthree\n", encoding="utf-8")
    assert main([str(f)]) == 0
    assert capsys.readouterr().out == f"2 3 14 {f}\n"


def test_path_required(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
