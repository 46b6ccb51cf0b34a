"""The container engine for the container tests: the same probe and base image as `.ci/run`
(`python -m ledger.sandbox.container setup`). The tests skip with the probe's reason only where no
engine can run a container."""

from __future__ import annotations

import pytest

from ledger.errors import LedgerError
from ledger.sandbox.container import base, engine


@pytest.fixture(scope="session")
def podman() -> engine.Engine:
    found = engine.find_engine()
    if found is None:
        pytest.skip(engine.probe().reason)
    if not found.image_exists(engine.BASE_IMAGE):
        try:
            base.build_base_image(found)
        except LedgerError as exc:
            pytest.skip(f"no base image: {exc}")
    result = engine.probe()
    if not result.runs:
        pytest.skip(result.reason)
    return found
