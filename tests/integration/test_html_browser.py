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

from pytest_dlconform.report import html, results

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
    # the claim's evidence block is collapsed; following the link opens it, so a person sees the cell
    assert tools.js("document.querySelector(':target').getBoundingClientRect().height") > 20
    assert tools.js("document.querySelector(':target pre.repro').checkVisibility()") is True


def test_page_fetches_nothing_from_the_network(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri())
    urls = [e["params"]["request"]["url"] for e in tools.events if e.get("method") == "Network.requestWillBeSent"]
    assert urls == [path.as_uri()]
    assert not [e for e in tools.events if e.get("method") == "Runtime.exceptionThrown"]


VISIBLE_TESTS = ("Array.from(document.querySelectorAll('#tests-table tbody tr')).filter(r=>!r.hidden)"
                 ".map(r=>r.cells[0].textContent)")


def test_overview_first_failures_expanded_the_rest_collapsed(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri())
    top = "document.querySelector(%r).getBoundingClientRect().top"
    tops = [tools.js(top % sel) for sel in ("#areas", "#matrix", "#failures", "#plots", "#tests", "#evidence")]
    assert tops == sorted(tops)
    assert tools.js("document.querySelector('#areas').textContent").startswith("areaclaimstests")
    failure = "document.querySelector('#failures .failure.v-violated-test')"
    assert tools.js(failure + ".checkVisibility()") is True  # shown without a click
    assert "GradientMismatch: off by 1%" in tools.js(failure + ".innerText")
    assert tools.js("document.querySelector('#failures .failure.v-error-test').innerText").count("worker crashed") == 1
    # a passing test's evidence: one visible line in its claim's block, the checks behind a click
    tools.js("document.querySelector('[id=\"claim-autodiff.tape.watch\"] details').open=true")
    test = "[id=\"claim-autodiff.tape.watch\"] section.cell-detail>details"
    line = tools.js(f"document.querySelector('{test} summary').innerText")
    assert "holds" in line and "1 checks, worst margin 0.2" in line
    assert tools.js(f"document.querySelector('{test} pre').checkVisibility()") is False


def test_test_table_is_searched_and_sorted_from_the_query_string(page: tuple[DevTools, Path]) -> None:
    tools, path = page
    tools.open(path.as_uri() + "?q=execution+torch")
    assert tools.js(VISIBLE_TESTS) == ["execution/test_c.py::test_w[cpu-torch]"]  # from the area folder on
    assert tools.js("document.getElementById('q-count').textContent") == "1 of 5 tests"
    tools.open(path.as_uri() + "?sort=margin&order=desc")
    assert tools.js(VISIBLE_TESTS)[0] == "autodiff/test_a.py::test_x[cpu-tf]"  # the only one with a margin
    tools.click("#tests-table th[data-key='verdict']")
    verdicts = tools.js("Array.from(document.querySelectorAll('#tests-table tbody tr')).map(r=>r.cells[3].textContent)")
    assert verdicts == sorted(verdicts)
    assert tools.js("document.querySelector(\"#tests-table th[data-key='verdict']\").getAttribute('aria-sort')") == "ascending"


TRIMMED = Path(__file__).with_name("html_trimmed_report.json")


def test_a_trimmed_real_report_as_a_person_sees_it(tmp_path: Path) -> None:
    """Every claim of a real full run (one test per cell, a slice of its coverage ledger):
    the plots are drawn, the divergences are one compact section, nothing fails in the page."""
    import base64

    binary = _browser()
    page = tmp_path / "real.html"
    doc = json.loads(TRIMMED.read_text())
    page.write_text(html.render(doc), encoding="utf-8")
    marked = sum(1 for e in doc["claims"].values() if e["expected"] and e["worst_margin"] is not None)
    tools = DevTools(binary, tmp_path / "profile")
    try:
        tools.open(page.as_uri())
        size = "(function(){var r=document.querySelector(%r).getBoundingClientRect();return [r.width,r.height];})()"
        for plot in ("#margin-plot", "#area-durations", "#slowest-tests", "#coverage-ops", "#coverage-dtype"):
            width, height = tools.js(size % plot)
            assert width > 200 and height > 40, plot
        assert tools.js("document.querySelectorAll('#margin-plot g.pt').length") == 77
        assert tools.js("document.querySelectorAll('#margin-plot g.pt[data-token=expected] path').length") == marked > 10
        assert tools.js("document.querySelectorAll('#slowest-tests g.bar').length") == 20
        text = tools.js("document.getElementById('divergences').innerText")
        assert "24 applied" in text and "2 other entries: 1 not reached, 1 not selected" in text
        assert tools.js("document.querySelectorAll('#tests-table tbody tr').length") == 136
        assert tools.js("Array.from(document.querySelectorAll('#evidence details')).filter(d=>d.open).length") == 0
        shot = tools.call("Page.captureScreenshot", {"format": "png"})
        (tmp_path / "real.png").write_bytes(base64.b64decode(shot["data"]))
        assert not [e for e in tools.events if e.get("method") == "Runtime.exceptionThrown"]
    finally:
        tools.close()
    try:
        from PIL import Image
    except ImportError:
        return
    colours = Image.open(tmp_path / "real.png").convert("RGB").getcolors(1 << 16)
    assert colours is not None and len(colours) > 20  # drawn, not a blank page
