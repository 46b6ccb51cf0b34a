"""The base image, built offline from Debian packages (no public registry is reachable here).

``build_base_image`` runs ``mmdebstrap --variant=minbase`` (bookworm, with Python 3, pytest and the
``python`` name) into a tarball and ``ENGINE import``s it as ``BASE_IMAGE``. ``.ci/run`` calls it
through ``python -m ledger.sandbox.container setup`` on a fresh machine and the container tests
call the same function (a session fixture), so both get the same image. A task Dockerfile whose
``FROM`` names an image this machine does not have is built ``--from`` this base.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import EngineFailed, EngineUnavailable
from ledger.sandbox.container.engine import BASE_IMAGE, Engine
from ledger.textbound import bound_text

SUITE = "bookworm"
PACKAGES = ("python3", "python3-pytest", "python3-pip", "python-is-python3", "git")
BUILD_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class BaseImage:
    ref: str
    image_id: str
    built: bool  # False: it existed already
    seconds: float

    def line(self) -> str:
        how = f"built in {self.seconds:.1f} s" if self.built else "present"
        return f"base image {self.ref} ({self.image_id[:19]}): {how}"


def build_base_image(engine: Engine, *, ref: str = BASE_IMAGE, rebuild: bool = False,
                     timeout: float = BUILD_TIMEOUT_S, mirror: str | None = None) -> BaseImage:
    """``ref`` built with mmdebstrap and imported, unless it exists (``rebuild`` forces it)."""
    start = time.monotonic()
    if not rebuild and engine.image_exists(ref):
        return BaseImage(ref, engine.inspect_image(ref)["id"], False, time.monotonic() - start)
    tool = shutil.which("mmdebstrap")
    if tool is None:
        raise EngineUnavailable("cannot build the base image: mmdebstrap is not installed "
                                "(apt-get install mmdebstrap)")
    with tempfile.TemporaryDirectory(prefix="ledger-base-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        argv = [tool, "--variant=minbase", "--quiet", f"--include={','.join(PACKAGES)}", SUITE, str(tar)]
        if mirror:
            argv.append(mirror)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EngineFailed(f"mmdebstrap {SUITE} did not finish in {timeout:g} s") from None
        if proc.returncode != 0:
            tail = bound_text(proc.stderr, 300, tail=1.0, unit="chars")[0].strip().splitlines()
            raise EngineFailed(f"mmdebstrap {SUITE} failed (exit {proc.returncode}): "
                               f"{tail[-1] if tail else 'no output'}")
        left = max(60.0, timeout - (time.monotonic() - start))
        engine.call(["import", "--change", 'CMD ["/bin/bash"]', str(tar), ref], timeout=left, check=True)
    return BaseImage(ref, engine.inspect_image(ref)["id"], True, time.monotonic() - start)
