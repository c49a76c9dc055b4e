// The web app in headless Chromium (Debian's `chromium`, driven by playwright-core; no browser is
// downloaded). Serves dist/, opens the page with `#train=2`, waits for the app's console lines
// ("oomlab: first frame", "oomlab: step 2 on …"), checks which backend trained, and saves a
// screenshot. Two modes:
//   webgpu — WebGPU on SwiftShader (no shader-f16): the app must train on the GPU;
//   webgl  — no WebGPU (WebGL only): the app must fall back to the CPU backend and say so, run its
//            steps in the CPU worker (a Web Worker with the SIMD build, dist/worker/) and log
//            each step's time;
// In both, the service worker (web/sw.js) must then control the page, and a reload with the server
// down (503) must start the app again from its cache.
//   zh     — the link `#lang=zh` (WebGL, CPU backend): the app must fetch the Chinese font, install it
//            and show Chinese with every character of the catalog in its fonts (the app logs the
//            count of missing ones; it must be 0). The English modes must never request the font.
//   phone  — 390×844 with touch (WebGL): the app must lay out for a phone (controls in a drawer;
//            the app logs its layout) and still train; screenshot target/browser-phone.png.
//   zero   — a shared setup of 2 simulated GPUs under ZeRO-2 (WebGL, the CPU worker): the worker
//            must run both GPUs' step (the app logs "2 simulated GPUs") and the allocator map
//            draw GPU 0's live segments.
//   teacher — a teacher link (locked and hidden controls, an unknown name, a lesson chapter): the
//            app must apply it, draw the locked controls disabled and the hidden ones not at all
//            (its log of the drawn widgets), and say what it ignored; screenshot
//            target/browser-teacher.png.
// In webgpu and webgl modes the page opens on the allocator map (`#tab=allocator`), which must log
// a non-empty list of live segments after the steps.
// In webgl mode a PyTorch memory snapshot (tests/fixtures/snapshot/minimal_p5.pickle) is also
// dropped on the page, then another chosen with the tab's file picker: each must open in the
// Snapshot tab (screenshot target/browser-webgl.png).
// Usage: node web/browser-test.mjs webgpu|webgl|zh|phone|teacher|zero   (after web/build.sh)
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { chromiumArgs, chromiumPath, openFileChooser, serveDist } from "./harness.mjs";

const mode = process.argv[2] || "webgpu";
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");
// Whether dist/'s worker is the app's own module (web/build.sh with OOMLAB_WORKER_FROM_APP=1).
const workerWasm = path.join(dist, "worker", "oomlab_bg.wasm");
const workerFromApp =
  fs.existsSync(workerWasm) && fs.readFileSync(workerWasm).equals(fs.readFileSync(path.join(dist, "oomlab_bg.wasm")));
const fontFile = "/NotoSansSC-oomlab.otf";
// `down`: the server answers 503 to everything, to check that the service worker starts the app
// from its cache.
let down = false;
const requested = [];
const { server, origin } = await serveDist(dist, { requested, isDown: () => down });

const base = chromiumArgs;
const webgpu = ["--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-vulkan=swiftshader", "--use-angle=vulkan"];
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "oomlab-chromium-"));
const executablePath = chromiumPath();
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath, headless: true, args: mode === "webgpu" ? [...base, ...webgpu] : base, locale: "en-US",
  viewport: mode === "phone" ? { width: 390, height: 844 } : { width: 1280, height: 800 },
  hasTouch: mode === "phone", isMobile: mode === "phone",
});
const page = context.pages()[0] || await context.newPage();
const lines = [];
let firstFrameMs = null;
const start = Date.now();
page.on("console", (m) => {
  const t = m.text();
  lines.push(t);
  if (t.includes("oomlab: first frame") && firstFrameMs === null) firstFrameMs = Date.now() - start;
});
page.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
let ok = false;
let why = "";
// The controls panel as the app drew it under the teacher link (logged from the widgets' own
// enabled state): locked ones disabled, hidden ones absent, the rest enabled.
function teacherDrawn(lines) {
  const l = lines.find((l) => l.includes("oomlab: teacher link drawn: "));
  if (!l) return false;
  const want = ["batch disabled", "budget disabled", "checkpointing absent", "precision absent", "sequence enabled", "model enabled"];
  return want.every((w) => l.includes(w));
}
try {
  const hashes = {
    zh: "#lang=zh&train=2",
    teacher: "#lock=batch,budget&hide=checkpointing,precision,nonsense&lesson=2&train=2",
    // A shared setup (`#s=`, the settings' JSON; missing fields take their defaults).
    zero: `#s=${Buffer.from(JSON.stringify({ batch: 4, seq: 32, parallel: { gpus: 2, zero: 2 } })).toString("base64url")}&train=2&tab=allocator`,
  };
  // OOMLAB_BROWSER_STEPS=N trains N steps (a benchmark of the step time; the test needs 2).
  const steps = Number(process.env.OOMLAB_BROWSER_STEPS || 2);
  // webgpu and webgl open on the allocator map (`tab=allocator`): it must draw the live
  // segments after the real steps (the app logs what each view draws when it changes).
  const hash = (hashes[mode] || "#train=2&tab=allocator").replace("train=2", `train=${steps}`);
  await page.goto(`${origin}/${hash}`);
  const deadline = Date.now() + 240_000;
  while (Date.now() < deadline && !lines.some((l) => l.includes(`oomlab: step ${steps} on`))) {
    if (lines.some((l) => l.includes("panicked") || l.includes("uncaptured wgpu error"))) break;
    await page.waitForTimeout(500);
  }
  const step = lines.find((l) => l.includes("oomlab: step 2 on"));
  // webgl: a PyTorch memory snapshot dropped on the page opens in the Snapshot tab.
  let dropped = null;
  let picked = null;
  if (mode === "webgl" && step) {
    // The tab's file picker first: the Snapshot tab, then its "Choose a file…" button, clicked
    // with the mouse where the accessible mirror (web/a11y.js) says they are drawn.
    const fc = await openFileChooser(page, "Choose a file…", "Snapshot");
    console.log(`file chooser: ${fc ? "opened" : "none"}`);
    if (fc) {
      await fc.setFiles(path.join(root, "tests/fixtures/snapshot/toy_oom.pickle"));
      const until = Date.now() + 20_000;
      while (Date.now() < until && !(picked = lines.find((l) => l.includes("oomlab: snapshot toy_oom.pickle")))) await page.waitForTimeout(250);
    }
    // …then a file dropped on the page.
    const b64 = fs.readFileSync(path.join(root, "tests/fixtures/snapshot/minimal_p5.pickle")).toString("base64");
    await page.evaluate((b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], "minimal_p5.pickle"));
      const canvas = document.querySelector("canvas");
      for (const type of ["dragenter", "dragover", "drop"])
        canvas.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, b64);
    const until = Date.now() + 20_000;
    while (Date.now() < until && !(dropped = lines.find((l) => l.includes("oomlab: snapshot minimal_p5.pickle")))) await page.waitForTimeout(250);
  }
  // zh: the font may come after the steps (they are quick in the CPU worker).
  if (mode === "zh") {
    const until = Date.now() + 30_000;
    while (Date.now() < until && !lines.some((l) => l.includes("oomlab: showing"))) await page.waitForTimeout(250);
  }
  const shown = lines.find((l) => l.includes("oomlab: showing"));
  // The allocator map as drawn now (the app logs a view's record each time it changes, so the
  // last line is the current one): the allocator's segments from the real steps, a non-empty
  // list whose sizes add up to the map's totals (the line's JSON is the view's own record).
  const mapLine = lines.findLast((l) => l.includes("oomlab: allocator-map drawn: "));
  let map = null;
  try { map = mapLine && JSON.parse(mapLine.slice(mapLine.indexOf("drawn: ") + 7)).allocator_map; } catch { map = null; }
  const mapOk = !!map && map.source === "allocator" && map.segments.length > 0 &&
    map.segments.reduce((a, s) => a + s.size_bytes, 0) === map.reserved_bytes &&
    map.segments.reduce((a, s) => a + s.allocated_bytes, 0) === map.allocated_bytes && map.allocated_bytes > 0;
  if (map) console.log(`allocator map after ${steps} steps (${map.source}): ${map.segments.length} segments, ${map.reserved_bytes} bytes reserved, ${map.allocated_bytes} allocated, at ${map.op}`);
  const fetchedFont = requested.includes(fontFile);
  if (!step) why = "no second training step";
  else if ((mode === "webgpu" || mode === "webgl" || mode === "zero") && !mapOk)
    why = `the allocator map drew no live segments after the step: ${mapLine}`;
  else if (mode === "zh" && !fetchedFont) why = "the Chinese font was not fetched";
  else if (mode === "zh" && !shown?.includes("showing 简体中文; characters of its catalog missing from the fonts: 0 "))
    why = `the app did not show Chinese with every glyph: ${shown}`;
  else if (mode !== "zh" && fetchedFont) why = "an English page downloaded the Chinese font";
  else if (mode === "phone" && !lines.some((l) => l.includes("oomlab: layout for a phone's")))
    why = "the app did not lay out for a phone at 390×844";
  else if (mode === "teacher" && !lines.some((l) => l.includes("oomlab: teacher link: locked [batch, budget]; hidden [checkpointing, precision]")))
    why = "the teacher link's locks and hides were not applied";
  else if (mode === "teacher" && !teacherDrawn(lines))
    why = `the controls panel did not draw batch and budget disabled, checkpointing and precision absent: ${lines.find((l) => l.includes("teacher link drawn"))}`;
  else if (mode === "teacher" && !lines.some((l) => l.includes("does not know (nonsense)")))
    why = "the unknown control name in the link was not reported";
  else if (mode === "webgl" && !dropped?.includes("1 devices, 1 segments"))
    why = `the dropped snapshot did not open: ${dropped}`;
  else if (mode === "webgl" && !picked?.includes("1 devices, 4 segments"))
    why = `the file picker did not open a snapshot: ${picked}`;
  else if (mode === "webgpu" && !step.includes("on gpu")) why = `expected the GPU backend: ${step}`;
  else if ((mode === "webgl" || mode === "zero") && !step.includes("web worker")) why = `expected the CPU backend in a Web Worker: ${step}`;
  else if (mode === "zero" && !step.includes("2 simulated GPUs")) why = `expected the step of 2 simulated GPUs: ${step}`;
  // CI's worker is the app's own module (OOMLAB_WORKER_FROM_APP=1, web/build.sh): no SIMD then.
  else if (mode === "webgl" && !lines.some((l) => l.includes(`oomlab worker: ready (simd128: ${!workerFromApp})`)))
    why = `the CPU worker did not start (its SIMD build expected: ${!workerFromApp})`;
  else if (mode !== "webgpu" && !step.includes("on cpu")) why = `expected the CPU fallback: ${step}`;
  else ok = true;
  await page.waitForTimeout(1000);
  const shot = path.join(root, "target", `browser-${mode}.png`);
  fs.mkdirSync(path.dirname(shot), { recursive: true });
  await page.screenshot({ path: shot });
  console.log(`screenshot: ${shot}`);
  if (ok) {
    const controlled = await page.evaluate(async () => {
      const ready = await Promise.race([navigator.serviceWorker.ready, new Promise((r) => setTimeout(r, 10_000))]);
      if (!ready) return false;
      for (let i = 0; i < 50 && !navigator.serviceWorker.controller; i++) await new Promise((r) => setTimeout(r, 100));
      return !!navigator.serviceWorker.controller;
    });
    if (!controlled) { ok = false; why = "the service worker does not control the page"; }
  }
  if (ok) {
    down = true;
    const before = lines.filter((l) => l.includes("oomlab: first frame")).length;
    await page.reload();
    const until = Date.now() + 60_000;
    while (Date.now() < until && lines.filter((l) => l.includes("oomlab: first frame")).length <= before) {
      await page.waitForTimeout(250);
    }
    if (lines.filter((l) => l.includes("oomlab: first frame")).length <= before) {
      ok = false; why = "with the server down, the app did not start from the service worker's cache";
    } else console.log("offline start from the service worker's cache: ok");
  }
  if (ok && mode === "zh") {
    // Offline, the Chinese font must come from the service worker's cache too.
    const zhLines = () => lines.filter((l) => l.includes("showing 简体中文; characters of its catalog missing from the fonts: 0 ")).length;
    const until = Date.now() + 30_000;
    while (Date.now() < until && zhLines() < 2) await page.waitForTimeout(250);
    if (zhLines() < 2) { ok = false; why = "offline, the Chinese font did not come from the service worker's cache"; }
    else console.log("offline Chinese font from the service worker's cache: ok");
  }
} catch (e) {
  why = String(e);
}
console.log(`first frame after ${firstFrameMs} ms (benchmark; target ≤ 2000 ms)`);
for (const l of lines.filter((l) => l.includes("oomlab") || l.includes("error") || l.includes("panicked"))) console.log(`  console: ${l}`);
await context.close();
server.close();
if (!ok) { console.error(`FAILED (${mode}): ${why}`); process.exit(1); }
console.log(`ok (${mode})`);
