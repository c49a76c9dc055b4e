// A class in headless Chromium, two pages against a real `oomlab serve` (the debug binary, which
// serves dist/ from disk): the teacher's — the app at /#teach&lesson=2, which starts a class at
// once and sends chapter 2's number question — and a student's — the plain page at the join
// address, on a phone-sized screen. The student joins and guesses; the teacher's app must log the
// guesses in its histogram ("oomlab: class guesses: chapter Some(2) round 1: 3 answers …"). Three
// students vote; the teacher starts a second round (the projector keeps round 1's spread, without
// the answer), one student reloads between the rounds and keeps their session, all vote again; the
// teacher presses R, the real step answers, the projector shows both rounds against it, each
// student's page shows their two votes and how far off each was, and the answers file holds both
// rounds. Another student opens the page in Chinese. Screenshots: target/browser-class-teacher.png and
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
// Two live followers a class: the teacher's app and one student's page in the first class (the
// other students' pages poll its state); the second class's are taken by this script, so that its
// student's page falls back to polling.
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
  await waitFor("question 2 on the projector", () => lines.some((l) => l.includes("class guesses: chapter Some(2) round 1: 0 answers")), 60000);

  // Three students join from phones and vote (round 1).
  const phone = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: "en-US" };
  const joinAs = async (name, who) => {
    const page = await browser.newPage(phone);
    page.on("console", (m) => lines.push(`${who}: ${m.text()}`));
    page.on("pageerror", (e) => lines.push(`pageerror: ${e.message}`));
    await page.goto(joinUrl);
    await page.waitForFunction(() => document.getElementById("join-button").textContent === "Join the class");
    if (await page.inputValue("#code") !== code) throw new Error("the join page did not read its code");
    await page.fill("#name", name);
    await page.click("#join-button");
    await page.waitForFunction(() => !document.getElementById("number").hidden, null, { timeout: 30000 });
    return page;
  };
  const vote = async (page, guess) => {
    await page.fill("#guess", guess);
    await page.click("#send");
    await page.waitForFunction((g) => document.getElementById("sent").textContent.startsWith(`Sent: ${g}`), guess, { timeout: 10000 });
  };
  const student = await joinAs("Test Student", "student");
  const prompt = await student.textContent("#prompt");
  if (!prompt.includes("how many times more memory")) throw new Error(`the question: ${prompt}`);
  // The setting the question is about, in words, above it.
  const setting = await student.textContent("#setting");
  if (!/toy GPT-2 \(tiny\), batch 16, sequence 64, budget 64\.00 MiB/.test(setting)) throw new Error(`the setting: ${setting}`);
  const secondStudent = await joinAs("Second Student", "second");
  const third = await joinAs("Third Student", "third");
  await vote(student, "2.5");
  await vote(secondStudent, "1.2");
  await vote(third, "8");
  await waitFor("round 1's guesses on the projector", () => lines.some((l) => /class guesses: chapter Some\(2\) round 1: 3 answers .*revealed none/.test(l)), 30000);

  // The second round: the projector keeps round 1's spread, without the answer.
  const again = await waitFor("the Second round button", () => mirroredButton(teacher, "Second round"), 30000);
  await teacher.mouse.click(again.x, again.y);
  await waitFor("round 2 on the projector", () => lines.some((l) => /class guesses: chapter Some\(2\) round 2: 0 answers \[.*\], round 1: 3 answers \[[^\]]*\d[^\]]*\], revealed none/.test(l)), 30000);
  await student.waitForFunction(() => document.getElementById("round").textContent.includes("discuss the question with a neighbour")
    && document.getElementById("round").textContent.includes("Your vote in round 1: 2.5"), null, { timeout: 15000 });
  // A student reloads between the rounds: the same session, not a second join.
  const idBefore = await secondStudent.evaluate((c) => localStorage.getItem(`oomlab-class-${c}`), code);
  await secondStudent.reload();
  await secondStudent.waitForFunction(() => !document.getElementById("number").hidden
    && document.getElementById("round").textContent.includes("Your vote in round 1: 1.2"), null, { timeout: 30000 });
  const idAfter = await secondStudent.evaluate((c) => localStorage.getItem(`oomlab-class-${c}`), code);
  const counted = await (await fetch(`${origin}/api/classes/${code}`)).json();
  if (!idBefore || idBefore !== idAfter || counted.students !== 3) {
    throw new Error(`a reload joined again: ${idBefore} → ${idAfter}, ${counted.students} students`);
  }
  // Each page hears of the second round (two of them by polling, every 4 s) before voting.
  for (const page of [student, secondStudent, third]) {
    await page.waitForFunction(() => document.getElementById("round").textContent.includes("discuss the question"), null, { timeout: 30000 });
  }
  await vote(student, "3");
  await vote(secondStudent, "3.2");
  await vote(third, "3.5");
  await waitFor("round 2's guesses on the projector", () => lines.some((l) => /round 2: 3 answers .*round 1: 3 answers .*revealed none/.test(l)), 30000);
  // The teacher reveals with R (a presenter's clicker): the real step runs in the teacher's
  // browser, its answer reaches the projector (both rounds against it) and the students, who see
  // how far off each of their votes was.
  await teacher.locator("canvas").first().focus();
  await teacher.keyboard.press("r");
  const revealed = await waitFor("the answer on the projector", () => lines.find((l) => /class guesses: chapter Some\(2\) round 2: 3 answers .*round 1: 3 answers .*revealed \d/.test(l)), 180000);
  await student.waitForFunction(() => document.getElementById("result").textContent.includes("% away from it"), null, { timeout: 30000 });
  const result = await student.textContent("#result");
  const answer = revealed.match(/revealed (\S+)/)[1];
  const two = Number(answer).toLocaleString("en", { maximumFractionDigits: 2 });
  if (!result.includes(`The answer: ${two}×`) || !result.includes("Your vote in round 1: 2.5×") || !result.includes("Your vote in round 2: 3×")
    || !result.includes("The peak goes from")) {
    throw new Error(`the student's result (with the chapter's explanation): ${result} (revealed ${answer})`);
  }
  // The answers so far, kept across a reload, with how far off the last vote was.
  await student.reload();
  await student.waitForFunction(() => !document.getElementById("history").hidden
    && document.getElementById("history-list").textContent.includes("Chapter 2: you said 3×"), null, { timeout: 30000 });
  // The answers file: both rounds, a round column.
  // A click that lands while a software-rendered frame is still being laid out can be lost (as
  // in harness.mjs's openFileChooser): up to five tries.
  let download = null;
  for (let attempt = 0; attempt < 5 && !download; attempt++) {
    await teacher.waitForTimeout(500 + 500 * attempt);
    await waitFor("the CSV button", () => mirroredButton(teacher, "Download the answers (CSV)"), 30000);
    const waiting = teacher.waitForEvent("download", { timeout: 8000 }).catch(() => null);
    // Through the mirror, as a screen reader presses it: the button may sit below the class
    // panel's fold, where a mouse would have to scroll first.
    await teacher.evaluate(() => [...document.querySelectorAll("#oomlab_a11y button")]
      .find((b) => b.getAttribute("aria-label") === "Download the answers (CSV)")?.click());
    download = await waiting;
  }
  if (!download) throw new Error("the answers file was not downloaded");
  const csv = fs.readFileSync(await download.path(), "utf8");
  const rows = csv.replace(/^\uFEFF/, "").trim().split("\r\n");
  const round = (r) => rows.filter((l) => l.startsWith(`"2","${r}",`)).length;
  if (rows[0] !== "chapter,round,student,name,answer,at_ms" || round(1) !== 3 || round(2) !== 3) {
    throw new Error(`the answers file: ${csv}`);
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
console.log("class test: ok (three students voted in two rounds; the projector kept round 1 without the answer, a reload kept its session, "
  + "the reveal reached each student with both votes, the answers file holds both rounds; "
  + "waiting, removal, the lock and a mangled address reached the students' page; nothing refused by the policy)");
