// A class in headless Chromium, two pages against a real `oomlab serve` (the debug binary, which
// serves dist/ from disk): the teacher's — the app at /#teach&lesson=2, which starts a class at
// once and sends chapter 2's number question — and a student's — the plain page at the join
// address, on a phone-sized screen. The student joins and guesses; the teacher's app must log the
// guess in its histogram ("oomlab: class guesses: chapter Some(2): 1 answers …"); the teacher
// presses R, the real step answers, and the student's page shows the answer and the distance. A second
// student opens the page in Chinese. Screenshots: target/browser-class-teacher.png and
// target/browser-class-student.png.
// Usage: node web/class-test.mjs   (after web/build.sh and a build of the oomlab binary)
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { chromiumArgs, chromiumPath, mirroredButton } from "./harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = process.env.OOMLAB_BIN || path.join(root, process.env.CARGO_TARGET_DIR || "target", "debug", "oomlab");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "oomlab-class-"));
// Two live followers a class: the teacher's app and one student's page in the first class; the
// second class's are taken by this script, so that its student's page falls back to polling.
const server = spawn(bin, ["serve", "--port", "0", "--bind", "127.0.0.1", "--followers-per-class", "2", "--db", path.join(tmp, "class.sqlite")], {
  stdio: ["ignore", "pipe", "inherit"],
});
const origin = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error("oomlab serve did not start")), 30000);
  readline.createInterface({ input: server.stdout }).on("line", (line) => {
    const m = line.match(/listening on (\S+)/);
    if (m) { clearTimeout(timer); resolve(`http://${m[1]}`); }
  });
  server.on("exit", (code) => reject(new Error(`oomlab serve exited (${code})`)));
});

const browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: chromiumArgs });
const lines = [];
let ok = false;
let why = "";
const waitFor = async (what, test, ms) => {
  const start = Date.now();
  while (Date.now() - start < ms) {
    const found = await test();
    if (found) return found;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
};
try {
  const teacher = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  teacher.on("console", (m) => lines.push(m.text()));
  teacher.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
  await teacher.goto(`${origin}/#teach&lesson=2`);
  const started = await waitFor("the class to start", () => lines.find((l) => l.includes("oomlab: class started: ")), 180000);
  const [, code, joinUrl] = started.match(/class started: (\S+) at (\S+)/);
  await waitFor("question 2 on the projector", () => lines.some((l) => l.includes("class guesses: chapter Some(2): 0 answers")), 60000);

  const phone = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: "en-US" };
  const student = await browser.newPage(phone);
  student.on("console", (m) => lines.push(`student: ${m.text()}`));
  student.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
  await student.goto(joinUrl);
  await student.waitForFunction(() => document.getElementById("join-button").textContent === "Join the class");
  if (await student.inputValue("#code") !== code) throw new Error("the join page did not read its code");
  await student.fill("#name", "Test Student");
  await student.click("#join-button");
  await student.waitForFunction(() => !document.getElementById("number").hidden, null, { timeout: 30000 });
  const prompt = await student.textContent("#prompt");
  if (!prompt.includes("how many times more memory")) throw new Error(`the question: ${prompt}`);
  await student.fill("#guess", "2.5");
  await student.click("#send");
  await student.waitForFunction(() => document.getElementById("sent").textContent.startsWith("Sent: 2.5"), null, { timeout: 10000 });
  await waitFor("the guess on the projector", () => lines.some((l) => l.includes("class guesses: chapter Some(2): 1 answers")), 30000);
  // The teacher reveals with R (a presenter's clicker): the real step runs in the teacher's
  // browser, its answer reaches the projector and the student, who sees how far off the guess was.
  await teacher.locator("canvas").first().focus();
  await teacher.keyboard.press("r");
  const revealed = await waitFor("the answer on the projector", () => lines.find((l) => /class guesses: chapter Some\(2\): 1 answers .*revealed \d/.test(l)), 180000);
  await student.waitForFunction(() => document.getElementById("result").textContent.includes("% away from it"), null, { timeout: 30000 });
  const result = await student.textContent("#result");
  const answer = revealed.match(/revealed (\S+)/)[1];
  const two = Number(answer).toLocaleString("en", { maximumFractionDigits: 2 });
  if (!result.includes(`The answer: ${two}×`) || !result.includes("Your guess: 2.5×")) {
    throw new Error(`the student's result: ${result} (revealed ${answer})`);
  }
  // The teacher opens the list of students: its font for names (any script) is fetched then.
  const fonts = [];
  teacher.on("request", (r) => { if (r.url().endsWith("NotoSansSC-names-oomlab.otf")) fonts.push(r.url()); });
  const list = await waitFor("the list of students' header", () => mirroredButton(teacher, "Students, with their names (not for the projector)"), 30000);
  await teacher.mouse.click(list.x, list.y);
  await waitFor("the names font", () => lines.some((l) => l.includes("oomlab: names font fetched")), 60000);
  if (fonts.length !== 1) throw new Error(`the names font was asked for ${fonts.length} times`);
  await student.screenshot({ path: path.join(root, "target", "browser-class-student.png") });
  await teacher.screenshot({ path: path.join(root, "target", "browser-class-teacher.png") });

  // A second student reads the page in Chinese.
  const zh = await browser.newPage({ viewport: { width: 390, height: 844 }, locale: "zh-CN" });
  await zh.goto(`${joinUrl}?lang=zh`);
  await zh.waitForFunction(() => document.getElementById("join-button").textContent === "加入课堂");
  if ((await zh.getAttribute("html", "lang")) !== "zh-CN") throw new Error("the page's language is not zh-CN");

  // A second class, as the teacher's machine makes one (this script speaks from 127.0.0.1).
  const api = async (method, p, body, token) => {
    const headers = { "Content-Type": "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const r = await fetch(`${origin}${p}`, { method, headers, body: body ? JSON.stringify(body) : undefined });
    return { status: r.status, json: await r.json().catch(() => null) };
  };
  const second = (await api("POST", "/api/classes", { expected: 1 })).json;
  const teach = (action, body) => api("POST", `/api/classes/${second.code}/${action}`, body, second.teacher_token);
  await teach("chapter", { chapter: 1, question: { kind: "number" } });
  if ((await api("POST", `/api/classes/${second.code}/join`, {})).status !== 201) throw new Error("the first student");
  // Both of the second class's live streams taken: the next page is told to retry and polls.
  const holding = new AbortController();
  for (let i = 0; i < 2; i++) {
    const r = await fetch(`${origin}/api/classes/${second.code}/events`, { signal: holding.signal });
    if (r.status !== 200) throw new Error(`a held stream: ${r.status}`);
  }
  const late = await browser.newPage(phone);
  const polled = [];
  late.on("request", (r) => { if (r.url().endsWith(`/api/classes/${second.code}`)) polled.push(r.url()); });
  late.on("console", (m) => lines.push(`late: ${m.text()}`));
  late.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
  await late.goto(`${origin}/join/${second.code}`);
  await late.waitForFunction(() => document.getElementById("join-button").textContent === "Join the class");
  await late.click("#join-button");
  await late.waitForFunction(() => document.getElementById("prompt").textContent.includes("waiting to be let in"), null, { timeout: 10000 });
  if (!(await late.isHidden("#number"))) throw new Error("a waiting student is asked to guess");
  await teach("admit", { all_waiting: true });
  await late.waitForFunction(() => !document.getElementById("number").hidden, null, { timeout: 15000 });
  if (polled.length === 0) throw new Error("the page did not fall back to polling the class's state");
  holding.abort();
  const roster = (await api("GET", `/api/classes/${second.code}/students`, null, second.teacher_token)).json;
  await teach("remove", { students: [roster.students[1].student] });
  await late.fill("#guess", "3");
  await late.click("#send");
  await late.waitForFunction(() => !document.getElementById("join").hidden
    && document.getElementById("status").textContent.includes("removed you"), null, { timeout: 10000 });
  await teach("lock", { locked: true });
  await late.click("#join-button");
  await late.waitForFunction(() => document.getElementById("status").textContent.includes("locked"), null, { timeout: 10000 });
  // A mangled address: the code form, not a blank page.
  const mangled = await browser.newPage(phone);
  mangled.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
  await mangled.goto(`${origin}/join/%E0%A4%A`);
  await mangled.waitForFunction(() => !document.getElementById("join").hidden
    && document.getElementById("join-button").textContent === "Join the class", null, { timeout: 10000 });

  // Nothing refused by the policy (Chromium logs each refusal on the console).
  const refused = lines.filter((l) => /Content Security Policy|Refused to/.test(l));
  if (refused.length) throw new Error(`the Content-Security-Policy refused: ${refused.join(" | ")}`);
  ok = !lines.some((l) => l.startsWith("pageerror"));
  if (!ok) why = "a page error";
} catch (e) {
  why = e.message;
} finally {
  await browser.close();
  server.kill();
}
console.log(lines.filter((l) => l.includes("oomlab:")).join("\n"));
if (!ok) {
  console.error(`class test failed: ${why}`);
  process.exit(1);
}
console.log("class test: ok (a student's guess reached the projector's histogram; the reveal reached the student; "
  + "waiting, removal, the lock and a mangled address reached the students' page; nothing refused by the policy)");
