import json

import pytest

from stockctl.cli import main

CSV = "sku,name,qty,price\nC-3,chain,4,2.125\nB-2,bolt,100,0.25\nA-1,anvil,2,80\nD-4,drill,4,30\n"


@pytest.fixture
def stock(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text(CSV, encoding="utf-8")
    return str(f)


def test_report_json(stock, capsys):
    assert main(["--stock", stock, "report", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["sku"] for d in data] == ["A-1", "B-2", "C-3", "D-4"]
    assert data[2] == {"sku": "C-3", "name": "chain", "qty": 4, "value": 8.5}


def test_report_text_default_unchanged(stock, capsys):
    assert main(["--stock", stock, "report", "--format", "text"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "total 313.50"


def test_low_text(stock, capsys):
    assert main(["--stock", stock, "low"]) == 3
    assert capsys.readouterr().out == "A-1 anvil 2\nC-3 chain 4\nD-4 drill 4\n"


def test_low_threshold_json(stock, capsys):
    assert main(["--stock", stock, "low", "--threshold", "3", "--format", "json"]) == 3
    assert json.loads(capsys.readouterr().out) == [{"sku": "A-1", "name": "anvil", "qty": 2}]


def test_nothing_low(stock, capsys):
    assert main(["--stock", stock, "low", "--threshold", "1"]) == 0
    assert capsys.readouterr().out == "no low stock\n"


def test_missing_file(tmp_path, capsys):
    missing = str(tmp_path / "nope.csv")
    assert main(["--stock", missing, "report"]) == 2
    assert f"error: no such file: {missing}" in capsys.readouterr().err
