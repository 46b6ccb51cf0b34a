"""ledger.sandbox.registry: how --sandbox resolves over the registered backends (backends here
are test doubles that only say whether they work), and the modes read from the registry."""

from __future__ import annotations

from dataclasses import dataclass

import click
import pytest

from ledger.errors import NothingToRun
from ledger.sandbox import registry
from ledger.sandbox.port import Availability


@dataclass
class Said:
    """A backend that works or not, as told; counts its probes."""

    name: str
    ok: bool
    hint: str = ""
    isolated: bool = True
    probes: int = 0

    def available(self) -> Availability:
        self.probes += 1
        return Availability(self.ok, f"{self.name} {'works' if self.ok else 'is broken'}", "1.0")

    def agent_box(self, request: object) -> object:
        raise AssertionError("not used")

    def grading_box(self, request: object) -> object:
        raise AssertionError("not used")


@pytest.fixture
def backends(monkeypatch: pytest.MonkeyPatch) -> dict[str, Said]:
    made = {"none": Said("none", True, isolated=False), "bwrap": Said("bwrap", False, "get bwrap"),
            "podman": Said("podman", False, "get an engine"), "docker": Said("docker", True)}
    monkeypatch.setattr(registry, "_BACKENDS", dict(made))
    return made


def test_auto_falls_back_to_none_with_each_reason_and_hint(backends: dict[str, Said]) -> None:
    """auto: the first of AUTO that works; none of them: ``none``, each reason with its hint."""
    status = registry.resolve("auto")
    assert (status.mode, status.reason) == ("none", "no isolation: bwrap is broken; get bwrap")


def test_auto_takes_the_first_backend_that_works(backends: dict[str, Said]) -> None:
    backends["bwrap"].ok = True
    status = registry.resolve("auto")
    assert (status.requested, status.mode, status.version) == ("auto", "bwrap", "1.0")


def test_container_is_the_first_engine_that_works(backends: dict[str, Said]) -> None:
    """podman is tried first and broken: docker it is, under the mode ``container``."""
    status = registry.resolve("container")
    assert (status.requested, status.mode) == ("container", "docker")
    assert backends["podman"].probes == 1


def test_no_engine_is_exit_3_with_reasons_and_the_hint_once(backends: dict[str, Said]) -> None:
    backends["docker"].ok = False
    with pytest.raises(NothingToRun) as err:
        registry.resolve("container")
    assert str(err.value) == ("no container engine works here: podman is broken; docker is broken; "
                              "get an engine")
    assert err.value.exit_code == 3


def test_a_named_backend_that_does_not_work_is_exit_3(backends: dict[str, Said]) -> None:
    with pytest.raises(NothingToRun, match=r"^--sandbox bwrap was requested but bwrap is broken; "
                                           r"get bwrap$"):
        registry.resolve("bwrap")
    assert registry.resolve("docker").mode == "docker"


def test_modes_follow_the_registry_and_so_does_the_cli(backends: dict[str, Said]) -> None:
    """A backend registered after import is a mode, and ``--sandbox`` of the CLI accepts it."""
    from cli.main import SandboxChoice

    choice = SandboxChoice()
    with pytest.raises(click.BadParameter):
        choice.convert("late", None, None)
    registry.register(Said("late", True))  # type: ignore[arg-type]
    assert "late" in registry.modes()
    assert choice.convert("late", None, None) == "late"
    assert registry.resolve("late").mode == "late"
