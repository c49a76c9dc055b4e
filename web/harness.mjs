// What the browser scripts share (browser-test.mjs, a11y-test.mjs, snapshot-test.mjs, …): a
// static server for dist/, how headless Chromium is started (Debian's `chromium`; no browser is
// downloaded), and how a test finds and clicks what the app draws (through its accessible mirror).
import http from "node:http";
import fs from "node:fs";
import path from "node:path";

const types = { ".otf": "font/otf", ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

// Serves `dist` on 127.0.0.1 (a free port). `requested` collects the paths asked for; while
// `isDown()` every request gets 503; `pages` maps extra paths to HTML of their own.
export async function serveDist(dist, { requested = [], isDown = () => false, pages = {} } = {}) {
  const server = http.createServer((req, res) => {
    if (isDown()) { res.writeHead(503); res.end(); return; }
    const url = decodeURIComponent(req.url.split("?")[0].split("#")[0]);
    requested.push(url);
    if (url in pages) { res.writeHead(200, { "Content-Type": "text/html" }); res.end(pages[url]); return; }
    const file = path.join(dist, url === "/" ? "index.html" : url);
    if (!file.startsWith(dist) || !fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { "Content-Type": types[path.extname(file)] || "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}

// Chromium's flags for every run here (headless, no sandbox as root, nothing fetched outside).
export const chromiumArgs = ["--headless", "--no-sandbox", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

// $CHROMIUM, else Debian's chromium.
export const chromiumPath = () =>
  process.env.CHROMIUM || ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p));

// Where the accessible mirror (web/a11y.js) says the button named `name` is drawn: its centre in
// page coordinates, or null while there is none.
export const mirroredButton = (page, name) => page.evaluate((n) => {
  const el = [...document.querySelectorAll("#oomlab_a11y button")].find((b) => b.getAttribute("aria-label") === n);
  const r = el?.getBoundingClientRect();
  return r ? { x: r.x + r.width / 2, y: r.y + r.height / 2 } : null;
}, name);

// Opens the file chooser behind the mirrored button `button` (after clicking the mirrored
// `first`, e.g. a tab, if given), with the mouse where it is drawn. A frame takes 100+ ms on a
// software renderer and a click that lands while the tab is still being laid out is lost — as,
// now and then, the picker's own opening: so up to five tries, each waiting a little longer.
// The chooser, or null.
export async function openFileChooser(page, button, first = null) {
  for (let attempt = 0; attempt < 5; attempt++) {
    if (first) {
      const at = await mirroredButton(page, first);
      if (at) await page.mouse.click(at.x, at.y);
    }
    await page.waitForTimeout(1000 + 500 * attempt);
    const chooser = page.waitForEvent("filechooser", { timeout: 5_000 }).catch(() => null);
    const at = await mirroredButton(page, button);
    if (at) await page.mouse.click(at.x, at.y);
    const fc = await chooser;
    if (fc) return fc;
  }
  return null;
}
