// What the browser scripts share (browser-test.mjs, worker-bench.mjs): a static server for dist/
// and how headless Chromium is started (Debian's `chromium`; no browser is downloaded).
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
