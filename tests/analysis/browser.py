"""Open a local HTML file in headless Chromium with networking off, as a person would see it."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    # Networking off: no proxy reachable and no host resolves, so any fetch fails fast.
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageView:
    figures: tuple[int, int] | None  # (loaded, total) images, from the page's own marker
    console: list[str]  # console messages and uncaught errors the page produced
    dom: str


def view(
    page: Path,
    screenshot: Path | None = None,
    timeout: float = 60,
    size: tuple[int, int] = (1400, 3200),
) -> PageView:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium")
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [
                    binary,
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    f"--screenshot={screenshot}",
                    f"--window-size={size[0]},{size[1]}",
                    "--hide-scrollbars",
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
    marker = re.search(r'data-figures="(\d+)/(\d+)"', done.stdout)
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return PageView(
        figures=(int(marker[1]), int(marker[2])) if marker else None,
        console=console,
        dom=done.stdout,
    )


# Run in the page after load: for every figure, whether any of its image's outermost pixels are
# drawn on (a legend or title cut at the figure's edge), how much it is scaled on screen, and
# whether it or a card legend runs past its box. The answer goes into data-layout as JSON.
LAYOUT_SCRIPT = """
window.addEventListener("load", function () {
  try { measure(); } catch (e) {
    document.documentElement.dataset.layout = JSON.stringify({error: String(e)}); }
});
function measure() {
  var out = {width: window.innerWidth, figures: [], cards: [], pageOverflow:
             document.documentElement.scrollWidth > window.innerWidth + 1};
  for (const fig of document.querySelectorAll("figure[data-figure]")) {
    const img = fig.querySelector("img");  // loaded by now: its drawn source is currentSrc
    const w = img.naturalWidth, h = img.naturalHeight;
    const c = document.createElement("canvas");
    c.width = w; c.height = h;
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    const px = g.getImageData(0, 0, w, h).data;
    let edge = 0;
    const ink = (x, y) => { const i = 4 * (y * w + x);
      return px[i] < 235 || px[i + 1] < 235 || px[i + 2] < 235; };
    for (let x = 0; x < w; x++) { for (const y of [0, 1, h - 2, h - 1]) edge += ink(x, y); }
    for (let y = 0; y < h; y++) { for (const x of [0, 1, w - 2, w - 1]) edge += ink(x, y); }
    const box = img.getBoundingClientRect(), parent = fig.parentElement.getBoundingClientRect();
    out.figures.push({name: fig.dataset.figure, edgeInk: edge, scale: box.width / w,
                      natural: w, overflow: box.right > parent.right + 1});
  }
  for (const ul of document.querySelectorAll(".card .legend, .card .bar")) {
    out.cards.push({overflow: ul.scrollWidth > ul.clientWidth + 1});
  }
  document.documentElement.dataset.layout = JSON.stringify(out);
}
"""


# The trend page's inline SVG figures: how many of each figure's drawings show, and how much the
# one that shows is scaled on screen (its width attribute is in pt: 4/3 px each).
TREND_SCRIPT = """
window.addEventListener("load", function () {
  const out = {width: window.innerWidth, figures: [], pageOverflow:
               document.documentElement.scrollWidth > window.innerWidth + 1};
  for (const fig of document.querySelectorAll("figure.trend")) {
    const shown = [...fig.querySelectorAll("svg")].filter(s => s.getBoundingClientRect().width > 0);
    const scale = shown.map(s => s.getBoundingClientRect().width
                                 / (parseFloat(s.getAttribute("width")) * 4 / 3));
    out.figures.push({shown: shown.length, scale: scale});
  }
  document.documentElement.dataset.layout = JSON.stringify(out);
});
"""


def layout(
    page: Path,
    width: int,
    timeout: float = 90,
    script: str = LAYOUT_SCRIPT,
    attribute: str = "data-layout",
) -> dict:
    """The page laid out in a `width`-px window: the findings of `script` (LAYOUT_SCRIPT's for a
    report, TREND_SCRIPT's for a trend page)."""
    import html
    import json

    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium")
    probe = page.with_name(page.stem + f".layout{width}.html")
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", f"<script>{script}</script></body>"), "utf-8")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},2000",
             "--dump-dom", probe.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    found = re.search(attribute + r'="([^"]*)"', done.stdout)
    if found is None:
        raise AssertionError(f"the layout script did not answer: {done.stderr[-2000:]}")
    return json.loads(html.unescape(found[1]))


# Run in the page after load, for any of the report's pages: each figure's drawn width against
# its column's, its scale on screen, and whether a legend's box overlaps a data line's, read
# from the SVG itself (an <img>'s SVG is decoded and laid out, hidden, at the same size; the
# trend page's is inline); each headline card whose value wrapped; configuration rows marked as
# differing. The answer goes into data-geometry as JSON.
GEOMETRY_SCRIPT = """
window.addEventListener("load", function () {
  try { geometry(); } catch (e) {
    document.documentElement.dataset.geometry = JSON.stringify({error: String(e)}); }
});
const DATA = ['line2d', 'PathCollection', 'FillBetweenPolyCollection', 'PolyCollection']
  .map(k => 'g[id^="axes"] > g[id^="' + k + '"]').join(", ");
function box(r) { return {x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; }
function overlap(a, b) {
  const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0), h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
  return w > 1 && h > 1;
}
function legendHits(svg) {
  const legends = [...svg.querySelectorAll('g[id^="legend"]')].map(g => box(g.getBoundingClientRect()));
  const bars = [...svg.querySelectorAll('g[id^="axes"]')].flatMap(  // the first: the background
    a => [...a.querySelectorAll(':scope > g[id^="patch"]')].slice(1));
  const data = [...svg.querySelectorAll(DATA), ...bars].map(g => box(g.getBoundingClientRect()))
    .filter(b => b.x1 > b.x0 || b.y1 > b.y0);
  let hits = 0;
  for (const l of legends) for (const d of data) hits += overlap(l, d);
  return {legends: legends.length, data: data.length, hits: hits};
}
function fromImage(img) {
  const src = img.currentSrc || img.src;
  if (!src.startsWith("data:image/svg+xml;base64,")) return null;
  const holder = document.createElement("div");
  holder.style.cssText = "position:absolute;left:0;top:0;visibility:hidden;width:" +
    img.getBoundingClientRect().width + "px";
  holder.innerHTML = atob(src.split(",")[1]);
  document.body.appendChild(holder);
  const svg = holder.querySelector("svg");
  svg.setAttribute("width", "100%"); svg.removeAttribute("height");
  const found = legendHits(svg);
  holder.remove();
  return found;
}
function geometry() {
  const out = {width: window.innerWidth, height: document.documentElement.scrollHeight,
               figures: [], wrapped: [], differ: [], key: [],
               pageOverflow: document.documentElement.scrollWidth > window.innerWidth + 1};
  for (const fig of document.querySelectorAll("figure")) {
    const drawn = [...fig.querySelectorAll("img, svg")].filter(
      e => e.getBoundingClientRect().width > 0)[0];
    if (!drawn) continue;
    const parent = fig.parentElement, css = getComputedStyle(parent);
    const column = parent.getBoundingClientRect().width - parseFloat(css.paddingLeft)
      - parseFloat(css.paddingRight) - parseFloat(css.borderLeftWidth) - parseFloat(css.borderRightWidth);
    const width = drawn.getBoundingClientRect().width;
    const natural = drawn.tagName === "IMG" ? drawn.naturalWidth
      : parseFloat(drawn.getAttribute("width")) * 4 / 3;
    const legend = drawn.tagName === "IMG" ? fromImage(drawn) : legendHits(drawn);
    out.figures.push({name: fig.dataset.figure || fig.getAttribute("aria-label"),
                      column: column, width: width, scale: width / natural, legend: legend});
  }
  for (const v of document.querySelectorAll(".card .value")) {
    const size = parseFloat(getComputedStyle(v).fontSize);
    if (v.getBoundingClientRect().height > 1.6 * size || v.scrollWidth > v.clientWidth + 1)
      out.wrapped.push(v.closest(".card").dataset.metric);
  }
  for (const tr of document.querySelectorAll(".tested tr.differ")) out.differ.push(tr.dataset.tested);
  for (const li of document.querySelectorAll("[data-trend-key] li")) out.key.push(li.textContent);
  document.documentElement.dataset.geometry = JSON.stringify(out);
}
"""


def geometry(page: Path, width: int, screenshot: Path | None = None, timeout: float = 120) -> dict:
    """The page laid out in a `width`-px window: GEOMETRY_SCRIPT's findings; with `screenshot`,
    the whole page drawn at that width too (its height from the page, read first)."""
    found = layout(page, width, timeout, GEOMETRY_SCRIPT, attribute="data-geometry")
    if screenshot is not None:
        shoot(page, screenshot, width, found.get("height", 4000), timeout)
    return found


def shoot(page: Path, screenshot: Path, width: int, height: int, timeout: float = 120) -> None:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={screenshot}",
             f"--window-size={width},{height}", "--hide-scrollbars", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
