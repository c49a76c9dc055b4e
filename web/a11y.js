// oomlab's accessible mirror. The app draws everything on a canvas, where a screen
// reader finds nothing. Each frame whose accessibility tree changed, the app (src/app/a11y.rs)
// calls window.oomlabMirror(json) with the tree as a flat list in reading order: role, name,
// value, range, state, and where the widget is drawn (CSS pixels). This script keeps one hidden
// DOM element per entry, with the ARIA role, name and value, laid over the widget it stands for
// (so that a reader's highlight and touch exploration land where the widget is drawn). The
// elements take no pointer events: the mouse still reaches the canvas.
//
// The keyboard has two ways in. On the canvas (where the page starts), Tab, the arrows, Enter and
// Space are egui's own: its focus moves from widget to widget and is drawn there, and the canvas's
// aria-activedescendant names the focused widget's element. On the mirror (where a screen
// reader's cursor goes), each element takes the keys itself, as below.
// What assistive technology or the keyboard does to an element goes back to the app through
// window.oomlabA11yAction(id, action, value), set by the page's module script:
//   focus -> "focus" (egui moves its focus there, and draws its focus ring);
//   click, Enter or Space on a button, check box, option or tab -> "click";
//   arrows on a slider or number -> "increment" / "decrement"; Home / End -> "set" min / max;
//   a text box's new text -> "set".
// An entry marked live (the app's live line: a finished step, an out-of-memory error, a revealed
// answer) is copied into a polite or assertive aria-live region that exists from the start, so
// that every change is announced.
(() => {
  const root = document.createElement("div");
  root.id = "oomlab_a11y";
  root.setAttribute("aria-label", "oomlab");
  root.style.cssText = "position:absolute;inset:0;overflow:hidden;pointer-events:none;z-index:1;";
  const polite = document.createElement("div");
  const assertive = document.createElement("div");
  for (const [el, how] of [[polite, "polite"], [assertive, "assertive"]]) {
    el.id = `oomlab_live_${how}`;
    el.setAttribute("aria-live", how);
    el.setAttribute("aria-atomic", "true");
    el.style.cssText = "position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);";
  }
  const elements = new Map(); // id -> element
  let spoken = { polite: "", assertive: "" };

  const act = (id, action, value) => {
    if (typeof window.oomlabA11yAction === "function") window.oomlabA11yAction(id, action, value ?? undefined);
  };
  const clickable = new Set(["button", "checkbox", "radio", "tab", "combobox", "link"]);
  const ranged = new Set(["slider", "spinbutton", "separator", "progressbar"]);

  function create(e) {
    let el;
    if (e.role === "text") el = document.createElement("p");
    else if (e.role === "textbox") {
      el = document.createElement("input");
      el.type = "text";
      el.addEventListener("change", () => act(el.dataset.id, "set", el.value));
    } else if (clickable.has(e.role)) {
      el = document.createElement("button");
      el.type = "button";
      if (e.role !== "button") el.setAttribute("role", e.role);
      el.addEventListener("click", (ev) => { ev.preventDefault(); act(el.dataset.id, "click"); });
    } else {
      el = document.createElement("div");
      el.setAttribute("role", e.role);
    }
    if (ranged.has(e.role) && e.role !== "progressbar") {
      el.tabIndex = 0;
      el.addEventListener("keydown", (ev) => {
        const m = elements.get(el.dataset.id)?._entry;
        const key = { ArrowUp: "increment", ArrowRight: "increment", ArrowDown: "decrement", ArrowLeft: "decrement" }[ev.key];
        if (key) act(el.dataset.id, key);
        else if (ev.key === "Home" && m?.min !== undefined) act(el.dataset.id, "set", String(m.min));
        else if (ev.key === "End" && m?.max !== undefined) act(el.dataset.id, "set", String(m.max));
        else return;
        ev.preventDefault();
      });
    }
    el.addEventListener("focus", () => act(el.dataset.id, "focus"));
    el.style.cssText = "position:absolute;margin:0;padding:0;border:0;opacity:0;overflow:hidden;white-space:nowrap;font-size:1px;";
    el.dataset.id = e.id;
    el.dataset.role = e.role;
    el.id = `oomlab_a11y_${e.id}`;
    return el;
  }

  const set = (el, name, value) => {
    if (value === undefined || value === null || value === false) { if (el.hasAttribute(name)) el.removeAttribute(name); }
    else if (el.getAttribute(name) !== String(value)) el.setAttribute(name, String(value));
  };

  function update(el, e) {
    if (e.role === "text") { if (el.textContent !== e.name) el.textContent = e.name; }
    else set(el, "aria-label", e.name || undefined);
    if (e.role === "textbox" && document.activeElement !== el && el.value !== e.value) el.value = e.value ?? "";
    if (ranged.has(e.role)) {
      set(el, "aria-valuenow", e.now);
      set(el, "aria-valuemin", e.min);
      set(el, "aria-valuemax", e.max);
      set(el, "aria-valuetext", e.value || undefined);
    }
    if (e.role === "checkbox" || e.role === "radio") set(el, "aria-checked", e.checked === undefined ? undefined : String(e.checked));
    else if (e.role === "tab") set(el, "aria-selected", e.checked === undefined ? undefined : String(e.checked));
    else if (e.role === "button") set(el, "aria-pressed", e.checked === undefined ? undefined : String(e.checked));
    set(el, "aria-disabled", e.disabled ? "true" : undefined);
    // egui's own focus (Tab on the canvas moves it): the canvas, which keeps the page's focus,
    // points a reader at the focused widget's element.
    set(el, "data-focused", e.focused ? "true" : undefined);
    if (e.focused) set(document.getElementById("oomlab_canvas"), "aria-activedescendant", el.id);
    const [x, y, w, h] = e.rect;
    const css = `${x}px,${y}px,${w}px,${h}px`;
    if (el._rect !== css) {
      el._rect = css;
      Object.assign(el.style, { left: `${x}px`, top: `${y}px`, width: `${Math.max(w, 1)}px`, height: `${Math.max(h, 1)}px` });
    }
    el._entry = e;
  }

  window.oomlabMirror = (json) => {
    let list;
    try { list = JSON.parse(json); } catch { return; }
    if (!root.isConnected) {
      const canvas = document.getElementById("oomlab_canvas");
      // Before the canvas: Tab from the page reaches the mirrored controls first.
      document.body.insertBefore(root, canvas);
      document.body.append(polite, assertive);
    }
    const seen = new Set();
    let prev = null;
    for (const e of list) {
      seen.add(e.id);
      let el = elements.get(e.id);
      if (el && el.dataset.role !== e.role) { el.remove(); el = undefined; }
      if (!el) { el = create(e); elements.set(e.id, el); }
      update(el, e);
      const want = prev ? prev.nextSibling : root.firstChild;
      if (el !== want) root.insertBefore(el, want);
      prev = el;
      if (e.live && e.name && spoken[e.live] !== e.name) {
        spoken[e.live] = e.name;
        (e.live === "assertive" ? assertive : polite).textContent = e.name;
      }
    }
    for (const [id, el] of elements) {
      if (!seen.has(id)) { el.remove(); elements.delete(id); }
    }
  };
})();
