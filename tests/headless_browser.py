"""A real headless Chromium driven over the DevTools protocol, standard library only (issue 52.3).

:func:`find_chromium` finds the browser the CI installs (Debian's ``chromium``; or
``$ELMOC_CHROMIUM``); :class:`Browser` starts it with ``--remote-debugging-pipe`` (the
protocol's JSON messages, NUL-terminated, on file descriptors 3 and 4: no port, no websocket
library, safe under pytest-xdist) and :meth:`Browser.open` loads a page at a given window width
and returns what a person would see: a PNG screenshot of the first screen, the console errors
and uncaught exceptions, every link of the page, and whatever a JavaScript expression returns
once the page is rendered.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """``$ELMOC_CHROMIUM``, else the first of :data:`CANDIDATES` on PATH; None when none."""
    named = os.environ.get("ELMOC_CHROMIUM")
    if named:
        return named if Path(named).is_file() else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


@dataclass
class PageView:
    url: str
    screenshot: bytes
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, failed loads
    links: list[dict] = field(default_factory=list)  # {"href", "text", "inside"} of every <a href>
    value: object = None  # what the ``probe`` expression returned


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium process (a context manager)."""

    def __init__(self, executable: str, timeout: float = 60.0):
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="elmoc-chromium-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # the browser reads fd 3 and writes fd 4: move our ends above them first
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def wire():  # in the child, before exec: fds 3 and 4, inheritable
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        args = [executable, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-dev-shm-usage", f"--user-data-dir={self._profile}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses root with its sandbox (CI containers)
        self._proc = subprocess.Popen(args, preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(child_in)
        os.close(child_out)
        self._write, self._read = to_browser_w, from_browser_r
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    # --- the protocol ---------------------------------------------------------------------

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from the browser in time")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError(f"the browser closed its pipe (exit {self._proc.poll()})")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._write, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self._events.append(reply)

    def _wait_event(self, method: str, session: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self._events):
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return self._events.pop(i)
            self._events.append(self._message(deadline))

    def _evaluate(self, expression: str, session: str):
        result = self._send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                 "awaitPromise": True}, session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:60]}...: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    # --- a page as a person sees it ---------------------------------------------------------

    def open(self, url: str, width: int = 1280, height: int = 800, ready: str = "true", probe: str = "null",
             settle: float = 0.5, full_page: bool = False) -> PageView:
        """Load ``url`` in a fresh tab of ``width`` x ``height`` CSS pixels; wait until the
        JavaScript expression ``ready`` is true (then ``settle`` seconds more), and return the
        first screen's screenshot (``full_page``: the whole document's), the errors seen, the
        links and the value of ``probe``."""
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self._events.clear()
        for domain in ("Page", "Runtime", "Log", "Network"):
            self._send(f"{domain}.enable", session=session)
        self._send("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        self._send("Page.navigate", {"url": url}, session)
        self._wait_event("Page.loadEventFired", session, self.timeout)
        deadline = time.monotonic() + self.timeout
        while not self._evaluate(f"Boolean({ready})", session):
            if time.monotonic() > deadline:
                raise BrowserError(f"{url}: the page never became ready ({ready})")
            time.sleep(0.1)
        time.sleep(settle)
        shoot = {"format": "png"}
        if full_page:
            size = self._send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shoot.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                          "height": size["height"], "scale": 1})
        shot = base64.b64decode(self._send("Page.captureScreenshot", shoot, session)["data"])
        links = self._evaluate(
            "Array.from(document.querySelectorAll('a[href]')).map(a => ({href: a.href, raw: a.getAttribute('href'),"
            " text: a.textContent.trim().slice(0, 60), inside: a.closest('[id]') ? a.closest('[id]').id : ''}))",
            session)
        value = self._evaluate(probe, session)
        self._drain(session)
        errors = [_error_text(ev) for ev in self._events if ev.get("sessionId") == session and _is_error(ev)]
        self._send("Target.closeTarget", {"targetId": target})
        return PageView(url, shot, [e for e in errors if e], links, value)

    def _drain(self, session: str) -> None:
        """Collect the events already sent (a round trip that the browser answers after them)."""
        self._evaluate("0", session)


def _is_error(ev: dict) -> bool:
    method, params = ev.get("method"), ev.get("params", {})
    if method == "Runtime.exceptionThrown":
        return True
    if method == "Runtime.consoleAPICalled":
        return params.get("type") in ("error", "assert")
    if method == "Log.entryAdded":
        return params.get("entry", {}).get("level") == "error"
    return method == "Network.loadingFailed" and not params.get("canceled")


def _error_text(ev: dict) -> str:
    method, params = ev["method"], ev.get("params", {})
    if method == "Runtime.exceptionThrown":
        d = params.get("exceptionDetails", {})
        return f"exception: {d.get('exception', {}).get('description') or d.get('text')} ({d.get('url', '')})"
    if method == "Runtime.consoleAPICalled":
        return "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
    if method == "Log.entryAdded":
        e = params.get("entry", {})
        return f"log: {e.get('text')} ({e.get('url', '')})"
    return f"load failed: {params.get('errorText')} ({params.get('type')})"
