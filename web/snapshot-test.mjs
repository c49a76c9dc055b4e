// A large PyTorch memory snapshot opened in the web app (issue 31), in headless Chromium: a
// generated snapshot of about 55 MB (scripts/big_snapshot.py: 70,000 events of 18 frames;
// OOMLAB_SNAPSHOT_EVENTS=N for another size, e.g. 264000 for about 200 MB) is chosen with the
// Snapshot tab's file picker. The app must read it in its worker (the page logs each tenth read),
// keep drawing meanwhile (the page's animation frames are counted while it reads), and open it
// within 15 s, with no page error and no wasm out-of-memory. Screenshot target/browser-snapshot.png.
// Usage: node web/snapshot-test.mjs   (after web/build.sh)
// A file over 1 GiB (a benchmark, not CI: OOMLAB_SNAPSHOT_EVENTS=1500000 writes 1.2 GB) takes
// longer than 15 s to read: OOMLAB_SNAPSHOT_SECONDS sets the time allowed.
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { chromiumArgs, chromiumPath, openFileChooser, serveDist } from "./harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const events = Number(process.env.OOMLAB_SNAPSHOT_EVENTS || 70_000);
const allowed = Number(process.env.OOMLAB_SNAPSHOT_SECONDS || 15);
const name = `browser-snapshot-${events}.pickle`;
const file = path.join(root, "target", name);
if (!fs.existsSync(file)) {
  const made = spawnSync("python3", ["scripts/big_snapshot.py", "--events", String(events), "--out", file, "--no-time"], { cwd: root, stdio: "inherit" });
  if (made.status !== 0) throw new Error("could not write the snapshot");
}
const size = fs.statSync(file).size;
const { server, origin } = await serveDist(path.join(root, "dist"));
const browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: chromiumArgs });
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const lines = [];
page.on("console", (m) => lines.push(m.text()));
page.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
let why = "";
let seconds = null;
let frames = 0;
try {
  await page.goto(`${origin}/#tab=snapshot`);
  const ready = Date.now() + 120_000;
  while (Date.now() < ready && !lines.some((l) => l.includes("oomlab: first frame"))) await page.waitForTimeout(250);
  // The picker's button, clicked where the accessible mirror says it is.
  const chooser = await openFileChooser(page, "Choose a file…");
  if (!chooser) throw new Error("the file picker did not open");
  // The page's own animation frames while the worker reads: the page must keep drawing.
  await page.evaluate(() => { window.oomlabFrames = 0; const tick = () => { window.oomlabFrames++; requestAnimationFrame(tick); }; requestAnimationFrame(tick); });
  const began = Date.now();
  await chooser.setFiles(file);
  let opened = null;
  const until = Date.now() + Math.max(120, 4 * allowed) * 1000;
  while (Date.now() < until && !(opened = lines.find((l) => l.includes(`oomlab: snapshot ${name}`)))) {
    if (lines.some((l) => l.includes("Could not open") || l.includes("pageerror") || l.includes("panicked"))) break;
    await page.waitForTimeout(100);
  }
  seconds = (Date.now() - began) / 1000;
  frames = await page.evaluate(() => window.oomlabFrames);
  const tenths = lines.filter((l) => l.includes(`oomlab: reading ${name}:`));
  console.log(`${name}: ${(size / 1e6).toFixed(1)} MB opened in ${seconds.toFixed(1)} s; ${frames} animation frames meanwhile; ${tenths.length} progress lines; ${opened}`);
  const failed = lines.find((l) => l.includes("pageerror") || l.includes("panicked") || l.includes("out of memory") || l.includes("Could not open"));
  if (failed) why = failed;
  else if (!opened) why = "the snapshot did not open";
  else if (size < 50e6) why = `the snapshot is only ${size} bytes (at least 50 MB)`;
  else if (seconds > allowed) why = `it took ${seconds.toFixed(1)} s (at most ${allowed})`;
  else if (tenths.length < 3) why = `the page did not report the worker's progress: ${tenths}`;
  else if (frames < seconds) why = `the page drew ${frames} frames in ${seconds.toFixed(1)} s while the worker read`;
  await page.waitForTimeout(500);
  await page.screenshot({ path: path.join(root, "target", "browser-snapshot.png") });
} catch (e) {
  why = String(e);
}
await browser.close();
server.close();
if (why) {
  console.error(`FAILED: ${why}\n${lines.slice(-30).join("\n")}`);
  process.exit(1);
}
console.log("ok: a large snapshot opens in the browser's worker");
