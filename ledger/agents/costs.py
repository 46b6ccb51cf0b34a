"""What an attempt cost: as the agent reported it, else estimated from tokens and a price table.

The built-in table holds approximate list prices in US dollars per million tokens (input, output)
for common models, as published by the vendors in late 2025 (``PRICES_AS_OF``). Prices change, cached
input is cheaper than the table says, and long-context tiers cost more: treat an ``estimated``
cost as an approximation, and put your own prices in a user file, which overrides the table::

    # .ledger/pricing.toml (or pass --pricing FILE); JSON with the same shape also works
    [models."my-model"]
    input = 0.5     # $ per million input tokens
    output = 1.5    # $ per million output tokens

Model names match exactly, then by the longest known prefix (``claude-sonnet-4-5-20250929`` uses
``claude-sonnet-4-5``), after dropping a ``provider/`` prefix. Agent names (``codex``, ``gemini``,
...) map to the model that CLI used by default at that date, for agents that do not say which
model they ran.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.agents.contracts import Usage
from ledger.errors import MalformedInput, NotFound

PRICES_AS_OF = "2025-11"


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    source: str = "builtin"

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1_000_000


_BUILTIN: dict[str, tuple[float, float]] = {
    # Anthropic
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    # OpenAI
    "gpt-5": (1.25, 10.0),
    "gpt-5-codex": (1.25, 10.0),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5.1-codex": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4),
    # Google
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "gemini-2.5-flash-lite": (0.1, 0.4),
    "gemini-2.0-flash": (0.1, 0.4),
    # DeepSeek (API list price)
    "deepseek-chat": (0.28, 0.42),
    "deepseek-reasoner": (0.28, 0.42),
}

# Agent name -> the model that CLI used by default at PRICES_AS_OF (for agents that do not say).
AGENT_DEFAULT_MODELS: dict[str, str] = {
    "claude": "claude-sonnet-4-5",
    "codex": "gpt-5-codex",
    "gemini": "gemini-2.5-pro",
    "aider": "claude-sonnet-4-5",
}


def builtin_pricing() -> dict[str, Price]:
    return {name: Price(i, o) for name, (i, o) in _BUILTIN.items()}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise MalformedInput(f"{where}: expected a non-negative number, got {value!r}")
    return float(value)


def parse_pricing(raw: Any, where: str) -> dict[str, Price]:
    """``{"models": {name: {"input": x, "output": y}}}`` (or the inner map alone) -> prices."""
    if not isinstance(raw, Mapping):
        raise MalformedInput(f"{where}: expected a table of models")
    table = raw.get("models", raw)
    if not isinstance(table, Mapping):
        raise MalformedInput(f"{where}: [models] must be a table")
    out = {}
    for name, entry in table.items():
        if not isinstance(entry, Mapping) or "input" not in entry or "output" not in entry:
            raise MalformedInput(f"{where}: model {name!r} needs input and output ($ per Mtok)")
        out[str(name)] = Price(_number(entry["input"], f"{where}: {name}.input"),
                               _number(entry["output"], f"{where}: {name}.output"),
                               source=str(where))
    return out


def load_pricing(user_file: Path | None = None) -> dict[str, Price]:
    """The built-in table, overridden entry by entry by ``user_file`` (TOML or JSON) if given."""
    prices = builtin_pricing()
    if user_file is None:
        return prices
    path = Path(user_file)
    if not path.is_file():
        raise NotFound(f"pricing file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedInput(f"{path}: cannot read: {exc}") from None
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except RecursionError:
        raise MalformedInput(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: "
                             "nested too deeply") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise MalformedInput(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    prices.update(parse_pricing(raw, str(path)))
    return prices


def default_pricing_file(ledger_dir: Path) -> Path | None:
    """``<ledger>/pricing.toml`` or ``pricing.json`` when present."""
    for name in ("pricing.toml", "pricing.json"):
        if (ledger_dir / name).is_file():
            return ledger_dir / name
    return None


def resolve_pricing(ledger_dir: Path, user_file: Path | None = None) -> tuple[dict[str, Price], Path | None]:
    """The one price table of a ledger: the built-in prices overridden by ``user_file``, else by
    ``<ledger>/pricing.toml|json`` when present; returns the table and the file it read (if any).
    ``ledger costs``, ``ledger bench --show-costs``, ``ledger run`` and ``ledger bench`` all use it."""
    found = user_file or default_pricing_file(ledger_dir)
    return load_pricing(found), found


def find_price(name: str | None, pricing: Mapping[str, Price]) -> tuple[str, Price] | None:
    """The entry for a model (exact, then longest prefix) or an agent's default model."""
    if not name:
        return None
    key = name.strip().lower()
    if key in AGENT_DEFAULT_MODELS and key not in pricing:
        key = AGENT_DEFAULT_MODELS[key]
    key = key.rsplit("/", 1)[-1]
    lowered = {k.lower(): k for k in pricing}
    if key in lowered:
        return lowered[key], pricing[lowered[key]]
    best = None
    for low, orig in lowered.items():
        if key.startswith(low) and key[len(low):len(low) + 1] in ("-", "@", ":", ".", "") \
                and (best is None or len(low) > len(best[0])):
            best = (low, orig)
    return (best[1], pricing[best[1]]) if best else None


def estimate_cost(usage: Usage, model: str | None = None, *,
                  pricing: Mapping[str, Price] | None = None) -> tuple[float | None, str]:
    """``(cost_usd, source)``: ``reported`` by the agent; ``priced`` from tokens x the price of
    the model the agent named (``usage.model``; each model at its own price when the agent
    reports tokens per model, ``usage.by_model``, and all of them are in the table); ``estimated`` from tokens x the price of
    ``model``, a fallback (a model or an agent name) for when ``usage.model`` is unknown or not in
    the table; else ``none``.
    """
    if usage.cost_usd is not None and math.isfinite(usage.cost_usd):
        return float(usage.cost_usd), "reported"
    if usage.tokens_in is None and usage.tokens_out is None:
        return None, "none"
    table = pricing if pricing is not None else builtin_pricing()
    if usage.by_model:
        found_all = [(find_price(name, table), tin, tout)
                     for name, (tin, tout) in sorted(usage.by_model.items())]
        if all(f is not None for f, _i, _o in found_all):
            return sum(f[1].cost(tin, tout) for f, tin, tout in found_all if f), "priced"
    named = find_price(usage.model, table)
    if named is not None:
        return named[1].cost(usage.tokens_in or 0, usage.tokens_out or 0), "priced"
    found = find_price(model, table)
    if found is None:
        return None, "none"
    return found[1].cost(usage.tokens_in or 0, usage.tokens_out or 0), "estimated"


def pricing_rows(pricing: Mapping[str, Price]) -> list[dict[str, Any]]:
    """Rows for ``ledger costs``: one per model, sorted by name."""
    return [{"model": name, "input_per_mtok": p.input_per_mtok,
             "output_per_mtok": p.output_per_mtok, "source": p.source}
            for name, p in sorted(pricing.items())]
