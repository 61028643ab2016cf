"""The built manual fits a 1,400-pixel-wide window: no page scrolls sideways.

The site is built with ``mkdocs build --strict`` into a temporary folder; each page gets
a small script that, after the page has loaded and the theme's own script has run,
writes the page's scroll width and the elements that stick out past the window into the
document; headless Chromium (Debian's ``chromium`` package) renders the page at
1,400 × 900 and prints the document (``--dump-dom``).  A page whose scroll width exceeds
its client width fails, naming the elements.  Chromium runs without network (every host
but loopback resolves to nothing), sandbox, GPU or profile (a fresh
``--user-data-dir``).

Without Chromium the test is skipped, except in CI (``CI=true``, which ``.ci/run``
sets after installing Chromium when it is missing): there a missing browser fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The window the pages must fit.
WIDTH, HEIGHT = 1400, 900
#: Chromium's options: headless, no sandbox (CI runs as root), nothing in the background.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=5000",
)
#: What the injected script writes: ``<pre id="overflow-probe">{json}</pre>``.
_PROBE = re.compile(r'<pre id="overflow-probe">(.*?)</pre>', re.DOTALL)
_SCRIPT = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var root = document.documentElement, wide = [];
  document.querySelectorAll("body *").forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.right > root.clientWidth + 1 && wide.length < 5) {
      wide.push(e.tagName.toLowerCase() + (e.className ? "." + String(e.className)
        .split(" ").join(".") : "") + " (right " + Math.round(r.right) + ")");
    }
  });
  var inner = [];
  document.querySelectorAll("pre, pre > code, table, .md-typeset__scrollwrap")
    .forEach(function (e) {
      if (e.scrollWidth > e.clientWidth + 1 && inner.length < 5) {
        inner.push(e.tagName.toLowerCase() + " " + e.scrollWidth + " > " + e.clientWidth
                   + " px: " + (e.textContent || "").trim().slice(0, 60));
      }
    });
  var out = document.createElement("pre");
  out.id = "overflow-probe";
  out.textContent = JSON.stringify({scroll: root.scrollWidth, client: root.clientWidth,
                                    wide: wide, inner: inner});
  document.body.appendChild(out);
}, 200); });
</script>"""

pytestmark = pytest.mark.slow


def chromium() -> str:
    """The Chromium executable; skips the test without one (fails in CI)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true and no chromium: .ci/run installs Debian's chromium package "
                    "(apt-get install -y chromium); the manual's overflow test needs it")
    pytest.skip("no chromium on PATH (apt-get install -y chromium); CI fails instead")


@pytest.fixture(scope="module")
def site() -> Path:
    """The manual built with ``--strict``, each page carrying the measuring script."""
    folder = Path(tempfile.mkdtemp(prefix="npu-place-site-"))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--site-dir", str(folder)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert done.returncode == 0, done.stderr
    for page in folder.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if "</body>" in text:
            page.write_text(text.replace("</body>", _SCRIPT + "</body>", 1), encoding="utf-8")
    return folder


def _pages() -> list[str]:
    """The manual's pages as built: ``cli/index.html`` for ``docs/cli.md``."""
    return sorted("index.html" if p.stem == "index" else f"{p.stem}/index.html"
                  for p in (ROOT / "docs").glob("*.md"))


def measure(browser: str, page: Path) -> dict[str, object]:
    """Render ``page`` in Chromium; what the injected script measured."""
    with tempfile.TemporaryDirectory(prefix="npu-place-chromium-") as profile:
        done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               "--dump-dom", page.as_uri()],
                              capture_output=True, text=True, timeout=120, check=False)
    match = _PROBE.search(done.stdout)
    assert match, f"{page}: Chromium printed no measurement (exit {done.returncode}): " \
                  f"{done.stderr[-1500:]}"
    result: dict[str, object] = json.loads(match.group(1).replace("&quot;", '"')
                                           .replace("&amp;", "&").replace("&lt;", "<")
                                           .replace("&gt;", ">"))
    return result


def test_every_page_fits_1400_pixels(site: Path) -> None:
    browser = chromium()
    pages = _pages()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(pages, pool.map(lambda p: measure(browser, site / p), pages),
                           strict=True))
    too_wide = {page: r for page, r in results.items()
                if int(str(r["scroll"])) > int(str(r["client"]))}
    assert not too_wide, "pages that scroll sideways at 1,400 px: " + "; ".join(
        f"{page}: {r['scroll']} > {r['client']} px, {r['wide']}"
        for page, r in too_wide.items())
    # a table or a code block that fits only by scrolling inside its own box
    boxed = {page: r["inner"] for page, r in results.items() if r["inner"]}
    assert not boxed, "tables or code blocks wider than the page at 1,400 px: " + "; ".join(
        f"{page}: {inner}" for page, inner in boxed.items())


def test_the_measurement_sees_a_page_that_is_too_wide(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "wide.html"
    page.write_text('<html><body><table><tr><td style="white-space: nowrap">'
                    + "x" * 400 + "</td></tr></table>" + _SCRIPT + "</body></html>",
                    encoding="utf-8")
    result = measure(browser, page)
    assert int(str(result["scroll"])) > WIDTH > int(str(result["client"])) - 40
    assert result["wide"]


def test_the_measurement_sees_a_code_block_that_scrolls_inside(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "boxed.html"
    page.write_text('<html><body><pre style="width: 600px; overflow-x: auto"><code>'
                    + "x" * 400 + "</code></pre>" + _SCRIPT + "</body></html>",
                    encoding="utf-8")
    result = measure(browser, page)
    assert int(str(result["scroll"])) <= int(str(result["client"]))  # the page fits
    assert result["inner"] and str(result["inner"][0]).startswith("pre ")
