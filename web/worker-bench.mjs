// Benchmark (not a test) of the browser's CPU fallback on its own: the CPU worker's step time in
// headless Chromium without the app's page drawing at the same time, next to the native CPU
// backend on one thread, in one run (issue 17's "≤ 3× native single-thread" target).
//
// Why: in the `webgl` mode of browser-test.mjs the page renders egui with WebGL on SwiftShader,
// ~100 ms of CPU per frame on the same two cores as the worker, so the worker's step times there
// are bimodal and mostly measure that contention. Here the app is opened only to learn the exact
// requests it sends its worker (the plan it starts, a step); that page is then closed, and a
// blank page of the same origin starts the same worker (dist/worker.js, the SIMD build) and
// replays those requests, timing each step by the worker's own clock (`compute_secs`) and by the
// page's.
//
// Usage: node web/worker-bench.mjs [steps]   (after web/build.sh and `cargo build --release`)
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { chromiumArgs, chromiumPath, serveDist } from "./harness.mjs";

const steps = Number(process.argv[2] || 30);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const blank = "<!doctype html><title>worker bench</title><p>oomlab CPU worker benchmark</p>";
const { server, origin } = await serveDist(path.join(root, "dist"), { pages: { "/__bench": blank } });
const context = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(os.tmpdir(), "oomlab-bench-")), {
  executablePath: chromiumPath(), headless: true, viewport: { width: 1280, height: 800 }, args: chromiumArgs,
});
let failure = null;
try {
  // 1. The app (no WebGPU here: it falls back to the CPU worker); record what it posts to it.
  const app = await context.newPage();
  await app.addInitScript(() => {
    window.__oomlabSent = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (m, ...rest) {
      if (typeof m === "string") window.__oomlabSent.push(m);
      return post.call(this, m, ...rest);
    };
  });
  await app.goto(`${origin}/#train=2`);
  let sent = [];
  for (let i = 0; i < 240 && !sent.some((m) => m.startsWith('{"Step"')); i++) {
    await app.waitForTimeout(500);
    sent = await app.evaluate(() => window.__oomlabSent);
  }
  const start = sent.filter((m) => m.startsWith('{"Start"')).pop();
  const step = sent.find((m) => m.startsWith('{"Step"'));
  if (!start || !step) throw new Error(`the app sent its worker no Start and Step (sent: ${sent.length})`);
  await app.close();
  // The step the app asked for (`plan::StepRequest`: the model, one micro-batch's shape, …).
  const request = JSON.parse(start).Start.request;
  // 2. The same worker and requests on a blank page of the same origin.
  const page = await context.newPage();
  await page.goto(`${origin}/__bench`);
  const result = await page.evaluate(async ({ start, step, steps }) => {
    const worker = new Worker("/worker.js", { type: "module" });
    const replies = [];
    let wake = null;
    worker.onmessage = (e) => { replies.push(JSON.parse(e.data)); if (wake) wake(); };
    const next = async (kind) => {
      for (;;) {
        const i = replies.findIndex((r) => r === kind || (typeof r === "object" && (kind in r || "Failed" in r)));
        if (i >= 0) return replies.splice(i, 1)[0];
        await new Promise((r) => { wake = r; setTimeout(r, 1000); });
      }
    };
    await next("Alive");
    worker.postMessage(start);
    const ready = await next("Ready");
    if (ready.Failed) return { error: JSON.stringify(ready.Failed) };
    const times = [];
    const base = JSON.parse(step);
    for (let i = 0; i <= steps; i++) {
      base.Step.index = i;
      const t0 = performance.now();
      worker.postMessage(JSON.stringify(base));
      const done = await next("Done");
      if (done.Failed) return { error: JSON.stringify(done.Failed) };
      // Step 0 warms up (first touch of every buffer).
      if (i > 0) times.push({ worker: done.Done.compute_secs * 1e3, page: performance.now() - t0 });
    }
    worker.terminate();
    return { times };
  }, { start, step, steps });
  if (result.error) throw new Error(`the worker failed: ${result.error}`);
  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return { median: s[Math.floor((s.length - 1) / 2)], min: s[0], max: s[s.length - 1] };
  };
  const w = stats(result.times.map((t) => t.worker));
  const p = stats(result.times.map((t) => t.page));
  const m = request.model;
  const { micro } = request;
  const accum = request.techniques.accum;
  const config = `d ${m.d_model} L ${m.n_layers} H ${m.n_heads} T ${micro.seq} B ${micro.batch}×${accum} vocab ${m.vocab}`;
  console.log(`browser CPU worker (${config}), ${steps} steps, no page drawing:`);
  console.log(`  worker's own time: median ${w.median.toFixed(1)} ms (min ${w.min.toFixed(1)}, max ${w.max.toFixed(1)})`);
  console.log(`  request to reply:  median ${p.median.toFixed(1)} ms (min ${p.min.toFixed(1)}, max ${p.max.toFixed(1)})`);
  // 3. The native CPU backend on one thread, same config, same run.
  const bin = path.join(root, "target/release/oomlab");
  if (fs.existsSync(bin)) {
    const out = execFileSync(bin, ["bench", "--backend", "cpu", "--only", "default", "--steps", String(steps), "--json",
      "--d-model", String(m.d_model), "--layers", String(m.n_layers), "--heads", String(m.n_heads),
      "--seq-len", String(micro.seq), "--micro-batch", String(micro.batch), "--accum", String(accum)],
    { env: { ...process.env, RAYON_NUM_THREADS: "1" } });
    const native = JSON.parse(out).configs[0].step_ms;
    console.log(`native CPU backend, one thread: ${native.toFixed(1)} ms per step`);
    console.log(`browser ÷ native single thread: median ${(w.median / native).toFixed(2)}×, best ${(w.min / native).toFixed(2)}× (target ≤ 3×)`);
  } else console.log(`native: not run (no ${bin}; cargo build --release)`);
} catch (e) {
  failure = String(e);
}
await context.close();
server.close();
if (failure) { console.error(`FAILED: ${failure}`); process.exit(1); }
