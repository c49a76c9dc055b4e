// The accessible mirror in headless Chromium (WebGL only, the CPU backend): what a screen reader
// gets from the page, read from Chromium's own accessibility tree (the DevTools protocol's
// Accessibility.getFullAXTree), and what the keyboard and assistive technology can do through it.
// The page opens lesson chapter 4 (`#lesson=4`, "In which part of the step is memory highest?",
// on the step timeline). Checked:
//   - the tree holds the lesson's question and its three choices (radio buttons), the batch slider
//     with its value, the One step button, and the timeline chart's description with the peak the
//     view drew (the app logs each view's record: "oomlab: timeline drawn: {...}");
//   - keyboard only, through the page: from the page's start (the canvas focused), Tab reaches the
//     batch slider, an arrow key moves it, and the peak shown (the view's record and the chart's
//     description in the tree) changes; the arrow key on the mirrored slider itself too;
//   - activating the mirrored option and the mirrored "Reveal" (as assistive technology does: a
//     click on the element) reveals the answer, runs the real step, and the aria-live region
//     announces both;
//   - the mirror never takes the mouse: a click on the canvas over a mirrored tab still reaches
//     the app.
// Usage: node web/a11y-test.mjs   (after web/build.sh)
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { chromiumArgs, chromiumPath, mirroredButton, serveDist } from "./harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { server, origin } = await serveDist(path.join(root, "dist"));
// The catalog's English words, so that the test names what a reader hears.
const en = Object.fromEntries(fs.readFileSync(path.join(root, "i18n/en.ftl"), "utf8").split("\n")
  .map((l) => l.match(/^([a-z0-9-]+) = (.*)$/)).filter(Boolean).map((m) => [m[1], m[2]]));
const context = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(os.tmpdir(), "oomlab-a11y-")), {
  executablePath: chromiumPath(), headless: true, args: chromiumArgs, locale: "en-US", viewport: { width: 1280, height: 800 },
});
const page = context.pages()[0] || await context.newPage();
const lines = [];
page.on("console", (m) => lines.push(m.text()));
page.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
const cdp = await context.newCDPSession(page);
await cdp.send("Accessibility.enable");
const ax = async () => (await cdp.send("Accessibility.getFullAXTree")).nodes.filter((n) => !n.ignored);
const nameOf = (n) => n.name?.value ?? "";
const find = (nodes, role, name) => nodes.find((n) => n.role?.value === role && nameOf(n).includes(name));
const mib = (bytes) => `${(bytes / 1048576).toFixed(2)} MiB`;
// The timeline as the view last drew it.
const timeline = () => {
  const l = lines.findLast((l) => l.includes("oomlab: timeline drawn: "));
  try { return l && JSON.parse(l.slice(l.indexOf("drawn: ") + 7)).timeline; } catch { return null; }
};
const until = async (what, done, ms = 60_000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (await done()) return; await page.waitForTimeout(200); }
  throw new Error(`waited too long for ${what}`);
};
let failure = null;
try {
  await page.goto(`${origin}/#lesson=4`);
  await until("the mirror", () => page.evaluate(() => !!document.querySelector('#oomlab_a11y [role="slider"]')));
  await until("the timeline", () => !!timeline());

  // What a screen reader finds.
  let nodes = await ax();
  const question = en["lesson-peak-question"];
  if (!nodes.some((n) => nameOf(n).includes(question))) throw new Error(`no "${question}" in the accessibility tree`);
  for (const key of ["lesson-peak-forward", "lesson-peak-backward", "lesson-peak-optimizer"]) {
    if (!find(nodes, "radio", en[key])) throw new Error(`no radio button "${en[key]}"`);
  }
  const slider = find(nodes, "slider", "batch");
  if (!slider) throw new Error("no slider named batch");
  const batch = slider.value?.value;
  if (batch !== 16) throw new Error(`the batch slider's value is ${JSON.stringify(slider.value)}`);
  if (!find(nodes, "button", en["run-one-step"])) throw new Error("no One step button");
  // Guess first: before the reveal the chart is veiled, and the mirror says so without a figure.
  const veiled = en["veil-chart"];
  if (!find(nodes, "image", veiled)) throw new Error(`no veiled chart: ${nodes.filter((n) => n.role?.value === "image").map(nameOf)}`);
  if (nodes.some((n) => / MiB/.test(nameOf(n)) && n.role?.value === "image")) throw new Error("a chart's figures before the reveal");
  console.log(`tree: the question, 3 choices, slider batch = ${batch}, the chart veiled until the reveal`);

  // Assistive technology activates an option, then Reveal.
  const click = (selector) => page.evaluate((s) => { const el = document.querySelector(s); if (el) el.click(); return !!el; }, selector);
  if (!await click(`#oomlab_a11y [role="radio"][aria-label="${en["lesson-peak-backward"]}"]`)) throw new Error("no mirrored option");
  await until("the option picked", () => page.evaluate((n) => document.querySelector(`#oomlab_a11y [role="radio"][aria-label="${n}"]`)?.getAttribute("aria-checked") === "true", en["lesson-peak-backward"]), 10_000);
  if (!await click(`#oomlab_a11y button[aria-label="${en["lesson-reveal"]}"]`)) throw new Error("no mirrored Reveal");
  await until("the revealed answer and its step, announced", () => page.evaluate(() => document.getElementById("oomlab_live_polite")?.textContent ?? "").then((t) => /Step 1 finished/.test(t)));
  const said = await page.evaluate(() => document.getElementById("oomlab_live_polite").textContent);
  if (!said.startsWith(en["lesson-choice-right"]) && !said.startsWith("Not this one")) throw new Error(`the live region said ${said}`);
  nodes = await ax();
  if (!nodes.some((n) => nameOf(n).startsWith(said.split(" Step")[0]))) throw new Error("the verdict is not in the tree");
  if (!lines.some((l) => l.includes("oomlab: step 1 on"))) throw new Error("the reveal ran no step");
  console.log(`reveal: announced "${said}"`);

  // Revealed: the chart is described with its peak.
  await until("the unveiled timeline", () => timeline()?.peak_allocated_bytes > 0, 20_000);
  const peak = mib(timeline().peak_allocated_bytes);
  await until("the chart's peak in the tree", async () => !!find(await ax(), "image", peak), 10_000);
  console.log(`tree after the reveal: chart with peak ${peak}`);

  // Keyboard only (the canvas has the focus): Tab moves egui's focus, which
  // the mirror reports (data-focused, and the canvas's aria-activedescendant), to the batch
  // slider; an arrow key moves it and the peak shown changes.
  const focusedName = () => page.evaluate(() => {
    const c = document.getElementById("oomlab_canvas");
    const el = document.getElementById(c.getAttribute("aria-activedescendant") || "");
    return document.activeElement === c && el?.dataset.focused === "true" ? `${el.getAttribute("role")}:${el.getAttribute("aria-label")}` : "";
  });
  let tabs = 0;
  for (; tabs < 200; tabs++) {
    if ((await focusedName()) === "slider:batch") break;
    await page.keyboard.press("Tab");
    await page.waitForTimeout(50);
  }
  if (tabs >= 200) throw new Error("Tab never reached the batch slider");
  await page.keyboard.press("ArrowRight");
  await until("a new peak after the arrow key", () => timeline()?.peak_allocated_bytes && mib(timeline().peak_allocated_bytes) !== peak, 20_000);
  const after = mib(timeline().peak_allocated_bytes);
  await until("the new peak in the tree", async () => !!find(await ax(), "image", after), 10_000);
  console.log(`keyboard: ${tabs} Tabs to the batch slider; → moved the peak from ${peak} to ${after}`);
  // The mirror's own keys, where a screen reader puts the focus: → on the mirrored slider.
  await page.focus('#oomlab_a11y [role="slider"][aria-label="batch"]');
  await page.keyboard.press("ArrowRight");
  await until("the mirrored slider's arrow key", () => mib(timeline().peak_allocated_bytes) !== after, 20_000);
  console.log(`mirror: → on the mirrored slider moved the peak to ${mib(timeline().peak_allocated_bytes)}`);

  // The mouse still reaches the canvas: a click where the mirrored Training tab lies opens it.
  const rect = await mirroredButton(page, en["tab-training"]);
  if (!rect) throw new Error("no mirrored Training tab");
  await page.mouse.click(rect.x, rect.y);
  await until("the Training view", () => lines.some((l) => l.includes("oomlab: training drawn: ")), 10_000);
  console.log("mouse: a click over the mirror reached the canvas");
} catch (e) {
  failure = String(e);
  const live = await page.evaluate(() => [...document.querySelectorAll("[aria-live]")].map((e) => `${e.id}: ${e.textContent}`).join(" | ")).catch(() => "");
  console.log(`  live regions: ${live}`);
  for (const l of lines.filter((l) => l.includes("oomlab: step") || l.includes("lesson"))) console.log(`  console: ${l}`);
}
for (const l of lines.filter((l) => l.includes("panicked") || l.includes("pageerror"))) console.log(`  console: ${l}`);
await page.screenshot({ path: path.join(root, "target", "browser-a11y.png") });
await context.close();
server.close();
if (failure) { console.error(`FAILED (a11y): ${failure}`); process.exit(1); }
console.log("ok (a11y)");
