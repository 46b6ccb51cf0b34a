"""One price table: `ledger costs` and `ledger bench --show-costs` read the same prices."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli.main import cli

PRICING = """
[models.house-model-1]
input = 1.25
output = 9.5
"""


def _json(home: Path, *args: str) -> dict:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_costs_and_bench_show_costs_agree_on_the_ledgers_pricing_file(tmp_path: Path) -> None:
    """A <ledger>/pricing.toml is read by both commands (bench used to ignore it)."""
    home = tmp_path / "L"
    home.mkdir()
    (home / "pricing.toml").write_text(PRICING)
    costs = _json(home, "costs", "--json")
    bench = _json(home, "bench", "--show-costs", "--json")
    assert costs["models"] == bench["models"]
    assert costs["user_file"] == bench["user_file"] == str(home / "pricing.toml")
    house = next(m for m in costs["models"] if m["model"] == "house-model-1")
    assert (house["input_per_mtok"], house["output_per_mtok"]) == (1.25, 9.5)


def test_an_explicit_pricing_file_wins_in_both(tmp_path: Path) -> None:
    """--pricing FILE overrides the ledger's own file, the same way in both commands."""
    home = tmp_path / "L"
    home.mkdir()
    (home / "pricing.toml").write_text(PRICING)
    other = tmp_path / "other.toml"
    other.write_text(PRICING.replace("9.5", "7.0"))
    costs = _json(home, "costs", "--pricing", str(other), "--json")
    bench = _json(home, "bench", "--show-costs", "--pricing", str(other), "--json")
    assert costs["models"] == bench["models"]
    assert next(m for m in bench["models"] if m["model"] == "house-model-1")["output_per_mtok"] == 7.0
