from stockctl.cli import main

CSV = "sku,name,qty,price\nB-2,bolt,100,0.25\nA-1,anvil,2,80\n"


def test_text_report(tmp_path, capsys):
    f = tmp_path / "s.csv"
    f.write_text(CSV, encoding="utf-8")
    assert main(["--stock", str(f), "report"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("A-1  anvil") and out[0].endswith("160.00")
    assert out[-1] == "total 185.00"
