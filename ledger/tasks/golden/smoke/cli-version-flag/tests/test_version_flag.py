import subprocess
import sys

import pytest

import wc_tool
from wc_tool.cli import main


def test_version_in_process(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code in (0, None)
    assert capsys.readouterr().out == f"wc-tool {wc_tool.__version__}\n"


def test_version_as_module():
    out = subprocess.run(
        [sys.executable, "-m", "wc_tool", "--version"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert out.stdout.strip() == "wc-tool 1.2.0"


def test_counting_still_works(tmp_path, capsys):
    f = tmp_path / "b.txt"
    f.write_text("x\n", encoding="utf-8")
    assert main([str(f)]) == 0
    assert capsys.readouterr().out.startswith("1 1 2 ")
