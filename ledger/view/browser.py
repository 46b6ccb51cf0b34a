"""Drive a headless Chromium over the DevTools protocol on a pipe (no websocket, no extra package).

Used by the browser tests (tests/view/) and benchmarks/view.py to load a report page and read what
it shows: console errors, network requests, DOM values, a screenshot, paint timings. Chromium
runs with every background-network feature off and a fresh profile in a temporary folder.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--disable-features=Translate,MediaRouter,OptimizationHints",
         "--remote-debugging-pipe")


class BrowserError(RuntimeError):
    """Chromium could not be started, or stopped answering."""


def find_chromium() -> str | None:
    """The path of a Chromium-family browser, or None (``LEDGER_CHROMIUM`` overrides)."""
    override = os.environ.get("LEDGER_CHROMIUM")
    if override:
        return override if Path(override).is_file() else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _high(*fds: int) -> tuple[int, ...]:
    """The same pipe ends moved to fds >= 10, so wiring them to 3 and 4 cannot clobber one."""
    out = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return out


class Browser:
    """One headless Chromium with one page attached; events are kept for inspection."""

    def __init__(self, executable: str | None = None, *, width: int = 1400, height: int = 1000,
                 timeout_s: float = 30.0) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no chromium found on PATH (apt-get install chromium)")
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="ledger-chromium-")
        r_cmd, w_cmd = _high(*os.pipe())  # we write commands; chromium reads fd 3
        r_evt, w_evt = _high(*os.pipe())  # chromium writes fd 4; we read

        def wire() -> None:  # in the child: the pipe ends become fds 3 and 4
            os.dup2(r_cmd, 3)
            os.dup2(w_evt, 4)

        self._proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=wire,
            start_new_session=True)
        os.close(r_cmd)
        os.close(w_evt)
        self._out = os.fdopen(w_cmd, "wb", buffering=0)
        self._in = os.fdopen(r_evt, "rb", buffering=0)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        if page is None:
            page = {"targetId": self.call("Target.createTarget", url="about:blank")["targetId"]}
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)

    # ------------------------------------------------------------------ protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer in time")
            chunk = self._in.read(65536)
            if not chunk:
                raise BrowserError("chromium closed the debugging pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self._out.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, after: int = 0) -> dict[str, Any]:
        """The first event ``method`` at index >= ``after`` of :attr:`events` (reading on)."""
        deadline = time.monotonic() + self.timeout_s
        i = after
        while True:
            while i < len(self.events):
                if self.events[i].get("method") == method:
                    return self.events[i]
                i += 1
            self.events.append(self._read_message(deadline))

    # ------------------------------------------------------------------ page helpers
    def load(self, url: str) -> float:
        """Navigate and wait for the load event; seconds it took."""
        mark = len(self.events)
        t0 = time.perf_counter()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired", mark)
        return time.perf_counter() - t0

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def console_errors(self) -> list[str]:
        out = []
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(str(p.get("exceptionDetails", {}).get("text")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value")) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(str(p["entry"].get("text")))
        return out

    def requests(self) -> list[str]:
        """Every URL the page requested (the document itself included)."""
        return [str(ev["params"]["request"]["url"]) for ev in self.events
                if ev.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self._out.close()
            self._proc.terminate()
            self._proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait(timeout=10)
        finally:
            self._in.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
