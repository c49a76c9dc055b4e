// The students' page's script (web/join.html; served at /join.js). Every word comes from the
// app's catalogs through /api/strings; each is named in a call of t(), and a test checks that the
// keys here and the server's list agree.
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// A code in the address; a mangled one ("/join/%E0%A4%A") is no code at all: the form asks.
function codeInPath() {
  try { return decodeURIComponent(location.pathname.split("/join/")[1] || ""); } catch (e) { return ""; }
}
const pathCode = codeInPath();
let lang = params.get("lang") || ((navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en");
let words = {};
let code = normalize(pathCode);
let student = null;
let state = null;
let mine = {}; // "chapter:round" -> the answer this page sent (kept across a reload)
let source = null;
let polling = null; // the timer asking for the state while the live stream is refused
let waiting = false; // joined past the class's expected size: the teacher has not let us in yet

// A message of the catalogs, its {arguments} filled in.
function t(key, args) {
  let s = words[key] || key;
  for (const [k, v] of Object.entries(args || {})) s = s.split("{" + k + "}").join(String(v));
  return s;
}
function normalize(typed) { return (typed || "").toUpperCase().replace(/[^A-Z0-9]/g, ""); }
function say(text, cls) { const s = $("status"); s.textContent = text || ""; s.className = cls || ""; }
function remember() { try { localStorage.setItem("oomlab-class-" + code, student); } catch (e) { /* private mode */ } }
function recall() { try { return localStorage.getItem("oomlab-class-" + code); } catch (e) { return null; } }
function forget() {
  try {
    for (const k of ["oomlab-class-", "oomlab-answers-", "oomlab-history-"]) localStorage.removeItem(k + code);
  } catch (e) { /* private mode */ }
}
// What each revealed chapter left: "chapter" -> { yours, answer, away (a number's %) or right }.
let soFar = {};
function keepHistory() { try { localStorage.setItem("oomlab-history-" + code, JSON.stringify(soFar)); } catch (e) { /* private mode */ } }
function recallHistory() {
  try { return JSON.parse(localStorage.getItem("oomlab-history-" + code) || "{}") || {}; } catch (e) { return {}; }
}
function keepAnswers() { try { localStorage.setItem("oomlab-answers-" + code, JSON.stringify(mine)); } catch (e) { /* private mode */ } }
function recallAnswers() {
  try { return JSON.parse(localStorage.getItem("oomlab-answers-" + code) || "{}") || {}; } catch (e) { return {}; }
}
// The round a state is in (1 for a server from before rounds).
function roundOf(s) { return (s && s.round) || 1; }

async function loadWords() {
  const r = await fetch("/api/strings?lang=" + encodeURIComponent(lang));
  const body = await r.json();
  lang = body.lang;
  words = body.words;
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.title = t("student-title");
  $("title").textContent = t("student-title");
  $("intro").textContent = t("student-intro");
  $("language").textContent = body.other.name;
  $("language").lang = body.other.lang === "zh" ? "zh-CN" : "en";
  $("code-label").textContent = t("student-code");
  $("name-label").textContent = t("student-name");
  $("join-button").textContent = t("student-join");
  $("joined").textContent = t("student-joined");
  $("guess-label").textContent = t("student-number");
  $("send").textContent = t("student-send");
  $("history-heading").textContent = t("student-history");
  if (state) render();
}

// The message for a refused request (`joining`: the request was a join).
function refusal(status, joining) {
  if (status === 404) return t("student-no-class");
  if (status === 423) return t("student-locked");
  if (status === 429) return joining ? t("student-join-busy") : t("student-too-fast");
  if (status === 422 && joining) return t("student-name-invalid");
  if (status === 409 && state && state.closed) return t("student-closed");
  if (status === 409 && state && state.revealed !== undefined && state.revealed !== null) return t("student-revealed-already");
  return t("student-refused", { status });
}

async function post(path, body) {
  const r = await fetch("/api/classes/" + code + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  let json = null;
  try { json = await r.json(); } catch (e) { /* not JSON */ }
  return { status: r.status, json };
}

async function join(event) {
  if (event) event.preventDefault();
  code = normalize($("code").value);
  if (code.length !== 6) { say(t("student-bad-code"), "bad"); return; }
  const name = $("name").value.trim();
  const r = await post("/join", name ? { name } : {});
  if (r.status !== 201) { say(refusal(r.status, true), "bad"); return; }
  student = r.json.student;
  waiting = r.json.waiting === true;
  remember();
  history.replaceState(null, "", "/join/" + code + location.search);
  follow();
}

// A new state of the class, from the live stream or from polling.
async function take(next) {
  state = next;
  say("");
  if (waiting) await checkWaiting();
  render();
  if (state.closed) { if (source) source.close(); stopPolling(); }
}

// Whether the teacher has let this student in yet (or removed them).
async function checkWaiting() {
  const r = await post("/me", { student });
  if (r.status === 200) { waiting = r.json.waiting === true; return; }
  if (r.status === 403) removed();
}

function follow() {
  $("join").hidden = true;
  $("class").hidden = false;
  say("");
  if (source) source.close();
  source = new EventSource("/api/classes/" + code + "/events");
  source.addEventListener("state", (e) => { stopPolling(); take(JSON.parse(e.data)); });
  source.onerror = () => {
    if (state && state.closed) return;
    // A refused stream (the class has too many followers) is not retried by the browser: ask
    // for the state every few seconds instead, and try the stream again later.
    if (source.readyState === EventSource.CLOSED) startPolling(); else say(t("student-offline"), "bad");
  };
}

function startPolling() {
  if (polling) return;
  let ticks = 0;
  const poll = async () => {
    ticks += 1;
    try {
      const r = await fetch("/api/classes/" + code);
      if (r.status === 200) take(await r.json());
      else if (r.status === 404) { stopPolling(); say(t("student-no-class"), "bad"); return; }
    } catch (e) { say(t("student-offline"), "bad"); }
    if (ticks % 8 === 0) { stopPolling(); follow(); }
  };
  poll();
  polling = setInterval(poll, 4000);
}

function stopPolling() { if (polling) { clearInterval(polling); polling = null; } }

// The teacher removed this student (or the session is an old one): join again.
function removed() {
  forget();
  student = null;
  waiting = false;
  if (source) source.close();
  stopPolling();
  showJoin();
  say(t("student-removed"), "bad");
}

// Words of a prompt's map in this page's language (English behind it).
function inLang(map) { return (map && (map[lang] || map.en)) || ""; }
function optionLabel(key) {
  const q = state.question, p = state.prompt;
  const i = q && q.kind === "choice" ? q.options.indexOf(key) : -1;
  return (p && p.options && p.options[i] && inLang(p.options[i])) || key;
}
function number(x) {
  const unit = (state.prompt && state.prompt.unit) || "";
  return Number(x).toLocaleString(lang === "zh" ? "zh-CN" : "en", { maximumFractionDigits: 2 }) + unit;
}
function shown(answer) { return typeof answer === "number" ? number(answer) : optionLabel(answer); }

function render() {
  $("class").hidden = false;
  $("joined").hidden = waiting;
  const q = state.question;
  const revealed = state.revealed !== undefined && state.revealed !== null;
  if (state.closed) {
    $("heading").textContent = "";
    $("prompt").textContent = t("student-closed");
    $("choices").replaceChildren();
    $("number").hidden = true;
    $("sent").textContent = "";
    $("result").replaceChildren();
    $("round").replaceChildren();
    $("setting").hidden = true;
    return;
  }
  if (waiting || !q || state.chapter === null || state.chapter === undefined) {
    $("heading").textContent = "";
    $("prompt").textContent = waiting ? t("student-let-in") : t("student-waiting");
    $("choices").replaceChildren();
    $("number").hidden = true;
    $("sent").textContent = "";
    $("result").replaceChildren();
    $("round").replaceChildren();
    $("setting").hidden = true;
    return;
  }
  $("heading").textContent = t("student-question", { chapter: state.chapter });
  const setting = inLang(state.prompt && state.prompt.setting);
  $("setting").textContent = setting;
  $("setting").hidden = !setting;
  $("prompt").textContent = inLang(state.prompt && state.prompt.question);
  const round = roundOf(state);
  const sent = mine[state.chapter + ":" + round];
  const first = round > 1 ? mine[state.chapter + ":1"] : undefined;
  const steps = [];
  if (round > 1 && !revealed) {
    const p = document.createElement("p"); p.className = "ok"; p.textContent = t("student-round-two"); steps.push(p);
  }
  if (first !== undefined && !revealed) {
    const p = document.createElement("p"); p.className = "muted"; p.textContent = t("student-vote", { round: 1, answer: shown(first) }); steps.push(p);
  }
  $("round").replaceChildren(...steps);
  const buttons = [];
  if (q.kind === "choice") {
    for (const key of q.options) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = optionLabel(key);
      b.setAttribute("aria-pressed", String(sent === key));
      b.disabled = revealed;
      b.addEventListener("click", () => send(key));
      buttons.push(b);
    }
  }
  $("choices").replaceChildren(...buttons);
  $("number").hidden = q.kind !== "number" || revealed;
  $("sent").textContent = sent === undefined ? t("student-not-sent") : t("student-sent", { answer: shown(sent) });
  $("sent").hidden = revealed;
  const result = [];
  if (revealed) {
    const line = (text, cls) => { const p = document.createElement("p"); p.textContent = text; if (cls) p.className = cls; result.push(p); };
    line(t("student-answer", { answer: shown(state.revealed) }), "ok");
    // Each of this student's votes on the chapter, how far each was from the answer.
    const votes = [];
    for (let r = 1; r <= round; r++) if (mine[state.chapter + ":" + r] !== undefined) votes.push([r, mine[state.chapter + ":" + r]]);
    if (votes.length === 0) line(t("student-none"), "muted");
    for (const [r, vote] of votes) {
      line(round > 1 ? t("student-vote", { round: r, answer: shown(vote) }) : t("student-yours", { answer: shown(vote) }));
      if (typeof state.revealed === "number") {
        line(t("student-off-by", { percent: awayFrom(vote) }));
      } else {
        line(vote === state.revealed ? t("student-right") : t("student-wrong"), vote === state.revealed ? "ok" : "bad");
      }
    }
  }
  if (revealed) {
    const why = inLang(state.explanation);
    if (why) { const p = document.createElement("p"); p.textContent = why; result.push(p); }
    remember_reveal(round);
  }
  $("result").replaceChildren(...result);
  showHistory();
}

// How far a number vote is from the revealed answer, in %, as this page's language writes it.
function awayFrom(vote) {
  const away = state.revealed === 0 ? Math.abs(vote) * 100 : Math.abs(vote - state.revealed) / Math.abs(state.revealed) * 100;
  return away.toLocaleString(lang === "zh" ? "zh-CN" : "en", { maximumFractionDigits: 1 });
}

// Keeps what a revealed chapter left for the list of answers so far (its own words: a later
// chapter's state no longer has this one's options).
function remember_reveal(round) {
  let last;
  for (let r = round; r >= 1 && last === undefined; r--) last = mine[state.chapter + ":" + r];
  if (last === undefined) return;
  const entry = { yours: shown(last), answer: shown(state.revealed) };
  if (typeof state.revealed === "number") {
    entry.away = awayFrom(last);
  } else {
    entry.right = last === state.revealed;
  }
  if (JSON.stringify(soFar[state.chapter]) !== JSON.stringify(entry)) { soFar[state.chapter] = entry; keepHistory(); }
}

// Every revealed chapter's answer so far, with how far off it was.
function showHistory() {
  const items = Object.keys(soFar).map(Number).sort((a, b) => a - b).map((chapter) => {
    const h = soFar[chapter];
    const li = document.createElement("li");
    li.textContent = h.away !== undefined
      ? t("student-history-number", { chapter, yours: h.yours, answer: h.answer, percent: h.away })
      : t("student-history-choice", { chapter, yours: h.yours, answer: h.answer, verdict: h.right ? t("student-right") : t("student-wrong") });
    return li;
  });
  $("history-list").replaceChildren(...items);
  $("history").hidden = items.length === 0;
}

async function send(answer) {
  if (!state || state.chapter === null) return;
  const chapter = state.chapter;
  const round = roundOf(state);
  const r = await post("/answers", { student, chapter, answer, round });
  if (r.status === 200) {
    mine[chapter + ":" + (r.json.round || round)] = r.json.answer;
    keepAnswers();
    say(t("student-sent", { answer: shown(r.json.answer) }), "ok");
    render();
  } else if (r.status === 403) {
    removed();
  } else if (r.status === 409 && waiting) {
    render();
  } else if (r.status === 409 && !state.closed) {
    // The class moved on (a new round or chapter) before this page heard: catch up, and the
    // student answers what is asked now.
    const now = await fetch("/api/classes/" + code);
    if (now.status === 200) await take(await now.json());
    if (roundOf(state) !== round || state.chapter !== chapter) say(t("student-round-two"), "bad");
    else say(refusal(r.status), "bad");
  } else {
    say(refusal(r.status), "bad");
  }
}

function showJoin() {
  $("join").hidden = false;
  $("class").hidden = true;
  $("code").value = code;
  (code ? $("name") : $("code")).focus();
}

$("join").addEventListener("submit", join);
$("number").addEventListener("submit", (e) => {
  e.preventDefault();
  const x = Number($("guess").value.replace(",", ".").trim());
  if ($("guess").value.trim() === "" || !Number.isFinite(x)) { say(t("student-number"), "bad"); return; }
  send(x);
});
$("language").addEventListener("click", (e) => {
  e.preventDefault();
  lang = lang === "zh" ? "en" : "zh";
  params.set("lang", lang);
  history.replaceState(null, "", location.pathname + "?" + params.toString());
  loadWords();
});

loadWords().then(async () => {
  student = code ? recall() : null;
  if (!student) { showJoin(); return; }
  mine = recallAnswers();
  soFar = recallHistory();
  // A remembered session: still in the class, still waiting, or removed?
  const r = await post("/me", { student });
  if (r.status === 403) { removed(); return; }
  if (r.status === 404) { forget(); student = null; showJoin(); say(t("student-no-class"), "bad"); return; }
  waiting = r.status === 200 && r.json.waiting === true;
  follow();
});
