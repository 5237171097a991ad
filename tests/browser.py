"""What the browser tests and benchmarks share: Debian's Chromium, its flags, and page scripts.
No Django here (benchmarks import it before settings exist)."""

from typing import Any

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# Where a bundle is drawn on the bundle map: its centre in page pixels and its colour on the map's
# raster ([r, g, b]: the commonest coloured pixel around the centre, hatching aside).
WHERE = """(name) => {
  const gd = document.getElementById('bundle-map');
  const map = gd.fulcrumMap;
  const cut = name.lastIndexOf('/');
  const namespace = name.slice(0, cut);
  const [lower, upper] = name.slice(cut + 1).split('_').map((h) => parseInt(h, 16));
  const row = map ? Array.from(gd.layout.yaxis.ticktext).indexOf(namespace) : -1;
  if (row < 0) return null;
  const mid = (Math.max(lower, map.x0) + Math.min(upper, map.x1)) / 2;
  const [x0, x1] = gd.layout.xaxis.range, [y0, y1] = gd.layout.yaxis.range;
  const box = gd.querySelector('.nsewdrag').getBoundingClientRect();
  const px = Math.round((mid - map.x0) * map.scale), py = Math.round((row + 0.5) * map.rowPx);
  const pixels = map.canvas.getContext('2d').getImageData(px - 3, py - 3, 7, 7).data;
  const counts = new Map();
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] === 0) continue;
    const key = [pixels[i], pixels[i + 1], pixels[i + 2]].join(',');
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  const common = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
  return {
    x: box.left + (mid - x0) / (x1 - x0) * box.width,
    y: box.top + (row - y1) / (y0 - y1) * box.height,
    fill: common ? common[0].split(',').map(Number) : null,
  };
}"""

# Whether the bundle is drawn in a broker's colour (its legend swatch), within the rounding of
# the raster's alpha.
DRAWN_AS = """([name, broker]) => {
  const where = (WHERE)(name);
  const swatch = document.querySelector(`#map-legend [data-broker="${broker}"] i`);
  if (!where || !where.fill || !swatch) return false;
  const want = getComputedStyle(swatch).backgroundColor.match(/\\d+/g).map(Number);
  return want.slice(0, 3).every((v, i) => Math.abs(v - where.fill[i]) <= 8);
}""".replace("(WHERE)", "(" + WHERE + ")")


def login(browser: Any, base: str, user: str, password: str, width: int = 1400) -> Any:
    """A new page of ``browser`` logged in to the console at ``base`` as ``user`` (on the
    dashboard when it returns)."""
    page = browser.new_page(viewport={"width": width, "height": 900 if width <= 1400 else 1000})
    page.goto(f"{base}/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def fold_reports() -> None:
    """The batch that folds load reports into the history and publishes the new rankings, in its
    own thread as a worker would (Playwright's sync API runs an event loop in the test's)."""
    import threading

    from django.db import connection

    from console.services.ingest import load_reports_fold

    def fold() -> None:
        load_reports_fold()
        connection.close()

    worker = threading.Thread(target=fold)
    worker.start()
    worker.join()
