"""The built manual fits a 1,400-pixel-wide window: no page scrolls sideways.

The site is built with ``mkdocs build --strict`` into a temporary folder; each page gets
a small script that, after the page has loaded and the theme's own script has run,
writes the page's scroll width and the elements that stick out past the window into the
document and posts them to the page's parent.  One headless Chromium (Debian's
``chromium`` package) opens one harness page holding every page of the manual in its own
1,400 × 900 frame (a frame lays its page out as a window of that size does: the media
queries read the frame's width), collects what each frame posted, and prints the
document (``--dump-dom``).  A page whose scroll width exceeds its client width fails,
naming the elements.  Chromium runs without network (every host but loopback resolves to
nothing), sandbox, GPU or profile (a fresh ``--user-data-dir``).  The two tests of the
measurement itself go through the same harness.

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
    f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=20000",
)
#: What the harness writes once every frame has posted: ``<pre id="overflow-probe">{json}
#: by frame number}</pre>``.
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
  window.parent.postMessage({frame: window.name, scroll: root.scrollWidth,
                             client: root.clientWidth, wide: wide, inner: inner}, "*");
}, 200); });
</script>"""
#: The harness: one frame per page (``{frames}``); when all ``{count}`` have posted, the
#: measurements by frame number go into ``<pre id="overflow-probe">``.
_HARNESS = """<html><body style="margin: 0"><script>
var results = {{}};
window.addEventListener("message", function (e) {{
  results[e.data.frame] = e.data;
  if (Object.keys(results).length === {count}) {{
    var out = document.createElement("pre");
    out.id = "overflow-probe";
    out.textContent = JSON.stringify(results);
    document.body.appendChild(out);
  }}
}});
</script>
{frames}
</body></html>"""
_FRAME = ('<iframe name="{number}" src="{src}" width="{width}" height="{height}" '
          'style="display: block; border: 0"></iframe>')

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


def measure(browser: str, pages: list[Path]) -> list[dict[str, object]]:
    """Render ``pages`` (HTML files carrying the measuring script) in one Chromium, each
    in its own window-sized frame of a harness page; what the script measured in each,
    in the order of ``pages``."""
    frames = "\n".join(_FRAME.format(number=number, src=page.as_uri(), width=WIDTH,
                                      height=HEIGHT) for number, page in enumerate(pages))
    with tempfile.TemporaryDirectory(prefix="npu-place-chromium-") as profile:
        harness = Path(profile) / "harness.html"
        harness.write_text(_HARNESS.format(count=len(pages), frames=frames),
                           encoding="utf-8")
        done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}/p",
                               "--dump-dom", harness.as_uri()],
                              capture_output=True, text=True, timeout=300, check=False)
    match = _PROBE.search(done.stdout)
    assert match, f"Chromium printed no measurement of all {len(pages)} page(s) (exit " \
                  f"{done.returncode}): {done.stderr[-1500:]}"
    results: dict[str, dict[str, object]] = json.loads(
        match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
        .replace("&gt;", ">"))
    return [results[str(number)] for number in range(len(pages))]


def test_every_page_fits_1400_pixels(site: Path) -> None:
    browser = chromium()
    pages = _pages()
    results = dict(zip(pages, measure(browser, [site / p for p in pages]), strict=True))
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
    result, = measure(browser, [page])
    assert int(str(result["scroll"])) > WIDTH > int(str(result["client"])) - 40
    assert result["wide"]


def test_the_measurement_sees_a_code_block_that_scrolls_inside(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "boxed.html"
    page.write_text('<html><body><pre style="width: 600px; overflow-x: auto"><code>'
                    + "x" * 400 + "</code></pre>" + _SCRIPT + "</body></html>",
                    encoding="utf-8")
    result, = measure(browser, [page])
    assert int(str(result["scroll"])) <= int(str(result["client"]))  # the page fits
    assert result["inner"] and str(result["inner"][0]).startswith("pre ")
