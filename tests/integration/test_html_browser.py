"""The HTML matrix in a real headless browser (Debian's ``chromium``).

The browser is driven through the Chrome DevTools Protocol over ``--remote-debugging-pipe``
(NUL-separated JSON on file descriptors 3 and 4): no driver binary, no Python package, no
browser download. The page is opened from a file, the grid is checked as rendered
(computed colours, visible rows), the verdict filter is clicked with real mouse events,
the area filter changed like a user would, and every network request the page made is
checked to be the file itself.

CI installs the browser with ``apt-get install -y chromium``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform import html, results

BROWSERS = ("chromium", "chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1000")


def _browser() -> str:
    explicit = os.environ.get("DLCONFORM_CHROMIUM")
    found = explicit or next((p for p in map(shutil.which, BROWSERS) if p), None)
    if not found:
        pytest.skip("chromium not found on PATH (Debian/Ubuntu: apt-get install -y chromium)")
    return found


class DevTools:
    """A minimal CDP client over the pipe transport (fd 3: commands in, fd 4: messages out)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_child_r, self._out = os.pipe()
        self._in, from_child_w = os.pipe()
        # Move the child's ends above 9 so bash's "3<&N 4>&M" never clobbers one with the other.
        hi_r, hi_w = _high_fd(to_child_r), _high_fd(from_child_w)
        os.close(to_child_r)
        os.close(from_child_w)
        flags = " ".join(FLAGS)
        cmd = (f'exec "$0" {flags} --remote-debugging-pipe --user-data-dir="$1" about:blank '
               f"3<&{hi_r} 4>&{hi_w} {hi_r}<&- {hi_w}>&-")
        self.proc = subprocess.Popen(["bash", "-c", cmd, binary, str(profile)], pass_fds=(hi_r, hi_w),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(hi_r)
        os.close(hi_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)  # the group we started (start_new_session), nothing else
            self.proc.wait()
        os.close(self._out)
        os.close(self._in)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe (exit status {self.proc.poll()})")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False,
             timeout: float = 30) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not browser and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def open(self, url: str) -> None:
        if self.session is None:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Network", "Runtime"):
                self.call(f"{domain}.enable")
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the centre of the element."""
        box = self.js(
            f"(function(){{var e=document.querySelector({json.dumps(selector)});e.scrollIntoView({{block:'center'}});"
            "var r=e.getBoundingClientRect();return [r.left+r.width/2,r.top+r.height/2];})()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})


def _high_fd(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD, 10)


def _result(nodeid: str, claim: str, verdict: str, column: tuple[str, str], **extra: Any) -> results.TestResult:
    params = {"framework": column[0], "device": column[1]}
    return results.TestResult(nodeid, claim, params, verdict=verdict, duration=0.5, **extra)


def _document() -> dict[str, Any]:
    """Two areas, every verdict, evidence and a reproduction: what the page must show."""
    collector = results.Collector()
    margin = {"checks": {"max error": {"observed": 2e-7, "tolerance": 1e-6, "margin": 0.2, "count": 20}},
              "notes": {"trace_count": 2}}
    rows = [
        ("suites/autodiff/test_a.py::test_x[cpu-tf]", "autodiff.tape.watch", results.HOLDS, ("tf", "cpu"), {"evidence": margin}),
        ("suites/autodiff/test_a.py::test_x[cpu-torch]", "autodiff.tape.nested", results.HOLDS, ("torch", "cpu"), {}),
        ("suites/autodiff/test_b.py::test_y[cpu-tf]", "autodiff.tape.persistent", results.VIOLATED, ("tf", "cpu"),
         {"reason": "GradientMismatch: off by 1%", "repro": "pytest 'suites/autodiff/test_b.py::test_y[cpu-tf]' --dl-seed=0"}),
        ("suites/execution/test_c.py::test_z[cpu-tf]", "execution.function.trace-once", results.NOT_APPLICABLE,
         ("tf", "cpu"), {"reason": "no GPU"}),
        ("suites/execution/test_c.py::test_w[cpu-torch]", "execution.compile.equivalence", results.ERROR,
         ("torch", "cpu"), {"reason": "HarnessError: worker crashed"}),
    ]
    for nodeid, claim, verdict, column, extra in rows:
        collector.tests[nodeid] = _result(nodeid, claim, verdict, column, **extra)
    env = {"python": "3.11", "frameworks": {"tensorflow": "2.21.0", "torch": "2.13.0"},
           "settings": {"frameworks": ["tensorflow", "torch"], "selected_devices": ["cpu"]}, "profile": "ci", "seed": 0}
    return results.report_document(collector, env, {})


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevTools, Path]]:
    binary = _browser()
    folder = tmp_path_factory.mktemp("html")
    path = folder / "report.html"
    path.write_text(html.render(_document()), encoding="utf-8")
    tools = DevTools(binary, folder / "profile")
    try:
        yield tools, path
    finally:
        tools.close()


VISIBLE_ROWS = ("Array.from(document.querySelectorAll('tr.claim-row')).filter(r=>!r.hidden&&r.offsetParent!==null)"
                ".map(r=>r.querySelector('th').textContent)")


def test_grid_renders_every_claim_with_its_colour(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri())
    assert tools.js(VISIBLE_ROWS) == [
        "autodiff.tape.nested", "autodiff.tape.persistent", "autodiff.tape.watch",
        "execution.compile.equivalence", "execution.function.trace-once",
    ]
    assert tools.js("Array.from(document.querySelectorAll('#matrix thead th')).map(h=>h.textContent)") == [
        "claim", "tf/cpu", "torch/cpu", "margin"]
    colour = "getComputedStyle(document.querySelector('td.cell[data-verdict=\"%s\"]')).backgroundColor"
    assert tools.js(colour % "violated") == "rgb(244, 180, 180)"
    assert tools.js(colour % "holds") == "rgb(200, 235, 201)"
    assert tools.js("document.getElementById('shown-count').textContent") == "5 of 5 claims shown"


def test_verdict_and_area_filters_hide_rows(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri())
    tools.click("input.verdict-filter[value='holds']")
    assert tools.js("document.querySelector(\"input.verdict-filter[value='holds']\").checked") is False
    assert tools.js(VISIBLE_ROWS) == [
        "autodiff.tape.persistent", "execution.compile.equivalence", "execution.function.trace-once"]
    tools.js("(function(){var s=document.getElementById('area-filter');s.value='execution';"
             "s.dispatchEvent(new Event('change'));})()")
    assert tools.js(VISIBLE_ROWS) == ["execution.compile.equivalence", "execution.function.trace-once"]
    assert tools.js("document.getElementById('shown-count').textContent") == "2 of 5 claims shown"
    hidden_details = "Array.from(document.querySelectorAll('article.claim-detail')).filter(a=>!a.hidden).length"
    assert tools.js(hidden_details) == 2


def test_filter_from_the_query_string(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri() + "?verdict=error")
    assert tools.js(VISIBLE_ROWS) == ["execution.compile.equivalence"]


def test_cell_links_to_its_evidence_and_reproduction(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri())
    tools.click("#row-autodiff\\.tape\\.persistent td.cell a")
    assert tools.js("location.hash") == "#ev-autodiff.tape.persistent--tf_cpu"
    target = tools.js("document.querySelector(':target').textContent")
    assert "GradientMismatch: off by 1%" in target
    assert "pytest 'suites/autodiff/test_b.py::test_y[cpu-tf]' --dl-seed=0" in target


def test_page_fetches_nothing_from_the_network(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri())
    urls = [e["params"]["request"]["url"] for e in tools.events if e.get("method") == "Network.requestWillBeSent"]
    assert urls == [path.as_uri()]
    assert not [e for e in tools.events if e.get("method") == "Runtime.exceptionThrown"]
