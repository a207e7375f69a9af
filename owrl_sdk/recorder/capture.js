// owrl recorder: run in an isolated world of every frame of the recording context (a world of
// its own: the page's scripts share its DOM but none of its objects, prototypes or globals, so
// they can neither call its binding nor rewrite its reports). It listens in the capture phase
// and reports each action of the person to the Python side through the binding
// __owrlRecord(json), which exists in this world only. A password field's value never leaves the page.
(() => {
  if (globalThis.__owrlRecorder) return;
  const send = globalThis.__owrlRecord;
  const TOKEN = "__OWRL_TOKEN__";
  const report = (action) => {
    if (action.kind !== "effects") {
      action.doc = prefix;
      action.before = pending ? Array.from(pending.before.keys()).slice(0, 2000) : [];
    }
    action.token = TOKEN;
    try { send(JSON.stringify(action)); } catch (e) { /* binding gone */ }
  };
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  const KEYS = new Set(["Enter", "Escape", "Tab", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown"]);
  const TEXT_TYPES = new Set(["", "text", "email", "tel", "url", "search", "password", "number", "date", "time",
    "datetime-local", "month", "week"]);
  let seq = 0;
  const prefix = Math.random().toString(36).slice(2, 8);

  // ---------------------------------------------------------------- roles and names
  function isTextField(el) {
    if (!el || !el.tagName) return false;
    if (el.tagName === "TEXTAREA" || el.isContentEditable) return true;
    return el.tagName === "INPUT" && TEXT_TYPES.has((el.getAttribute("type") || "").toLowerCase());
  }
  function isPassword(el) {
    const ac = (el.getAttribute && el.getAttribute("autocomplete")) || "";
    return el.tagName === "INPUT" && ((el.type || "").toLowerCase() === "password" || /(current|new)-password/.test(ac));
  }
  function role(el) {
    const explicit = norm(el.getAttribute("role")).split(" ")[0];
    if (explicit) return explicit;
    const tag = el.tagName;
    const type = (el.getAttribute("type") || "").toLowerCase();
    if (tag === "A" || tag === "AREA") return el.hasAttribute("href") ? "link" : "";
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "SELECT") return el.multiple || el.size > 1 ? "listbox" : "combobox";
    if (tag === "TEXTAREA") return "textbox";
    if (tag === "OPTION") return "option";
    if (tag === "IMG") return el.getAttribute("alt") === "" ? "" : "img";
    if (/^H[1-6]$/.test(tag)) return "heading";
    if (tag === "INPUT") {
      if (["button", "submit", "reset", "image"].includes(type)) return "button";
      if (type === "checkbox" || type === "radio") return type;
      if (type === "number") return "spinbutton";
      if (type === "range") return "slider";
      if (type === "search") return el.hasAttribute("list") ? "combobox" : "searchbox";
      if (["", "text", "email", "tel", "url", "password"].includes(type)) return el.hasAttribute("list") ? "combobox" : "textbox";
    }
    return "";
  }
  function contentText(node) {
    let out = "";
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) out += child.textContent;
      else if (child.nodeType === Node.ELEMENT_NODE) {
        const style = getComputedStyle(child);
        if (style.display === "none" || style.visibility === "hidden" || child.getAttribute("aria-hidden") === "true") continue;
        if (child.getAttribute("aria-label")) out += " " + child.getAttribute("aria-label") + " ";
        else if (child.tagName === "IMG") out += " " + (child.getAttribute("alt") || "") + " ";
        else if (["SELECT", "INPUT", "TEXTAREA"].includes(child.tagName)) out += " ";
        else out += " " + contentText(child) + " ";
      }
    }
    return out;
  }
  const FROM_CONTENT = new Set(["button", "link", "checkbox", "radio", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "option", "switch", "treeitem", "heading", "cell", "row", "gridcell", "columnheader"]);
  function labelText(el) {
    const parts = [];
    if (el.labels) for (const label of el.labels) parts.push(contentText(label));
    return norm(parts.join(" "));
  }
  function name(el) {
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const text = norm(by.split(/\s+/).map((id) => { const t = document.getElementById(id); return t ? contentText(t) : ""; }).join(" "));
      if (text) return text;
    }
    const aria = norm(el.getAttribute("aria-label"));
    if (aria) return aria;
    if (["INPUT", "SELECT", "TEXTAREA"].includes(el.tagName)) {
      const type = (el.getAttribute("type") || "").toLowerCase();
      if (el.tagName === "INPUT" && ["button", "submit", "reset"].includes(type)) {
        return norm(el.value) || (type === "submit" ? "Submit" : type === "reset" ? "Reset" : "");
      }
      if (el.tagName === "INPUT" && type === "image") return norm(el.getAttribute("alt")) || norm(el.getAttribute("title"));
      return labelText(el) || norm(el.getAttribute("title")) || norm(el.getAttribute("placeholder"));
    }
    if (el.tagName === "IMG") return norm(el.getAttribute("alt")) || norm(el.getAttribute("title"));
    if (FROM_CONTENT.has(role(el))) {
      const text = norm(contentText(el));
      if (text) return text;
    }
    return norm(el.getAttribute("title"));
  }

  // ---------------------------------------------------------------- selectors
  const cssq = (s) => s.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
  function unique(selector, el) {
    try { const found = document.querySelectorAll(selector); return found.length === 1 && found[0] === el; } catch (e) { return false; }
  }
  function cssPath(el) {
    const steps = [];
    for (let node = el; node && node.nodeType === Node.ELEMENT_NODE && node !== document.documentElement; node = node.parentElement) {
      if (node !== el && node.id && /^[A-Za-z][\w-]*$/.test(node.id) && unique("#" + node.id, node)) { steps.unshift("#" + node.id); break; }
      let step = node.tagName.toLowerCase();
      const parent = node.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((c) => c.tagName === node.tagName);
        if (same.length > 1) step += `:nth-of-type(${same.indexOf(node) + 1})`;
      }
      steps.unshift(step);
    }
    for (let k = 1; k <= steps.length; k++) {
      const candidate = steps.slice(steps.length - k).join(" > ");
      if (unique(candidate, el)) return candidate;
    }
    return steps.join(" > ");
  }
  // how many elements Playwright's role=R[name="N"] (substring, any case) and [name="N"s] would find
  function roleCounts(r, accessible) {
    let loose = 0, exact = 0;
    const lower = accessible.toLowerCase();
    for (const other of document.querySelectorAll("*")) {
      if (role(other) !== r) continue;
      const n = name(other);
      if (n.toLowerCase().includes(lower)) loose++;
      if (n === accessible) exact++;
    }
    return [loose, exact];
  }
  function describe(el) {
    const r = role(el);
    const tag = el.tagName.toLowerCase();
    const css = [];
    const testid = el.getAttribute("data-testid") || el.getAttribute("data-test-id");
    if (testid) css.push(`[data-testid="${cssq(testid)}"]`);
    if (el.id && /^[A-Za-z][\w-]*$/.test(el.id)) css.push("#" + el.id);
    const fieldName = el.getAttribute("name");
    if (fieldName && ["input", "select", "textarea", "button"].includes(tag)) css.push(`${tag}[name="${cssq(fieldName)}"]`);
    const checked = css.filter((s) => unique(s, el));
    checked.push(cssPath(el));
    const accessible = r ? name(el) : "";
    return {
      role: r, name: accessible, tag, css: checked, role_counts: r ? roleCounts(r, accessible) : [0, 0],
      field_name: fieldName || el.id || "", label: labelText(el) || norm(el.getAttribute("aria-label")) || norm(el.getAttribute("placeholder")),
    };
  }

  // ---------------------------------------------------------------- what an action changed
  function visibleTexts() {
    const seen = new Map();
    const walker = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_TEXT);
    let count = 0;
    for (let node = walker.nextNode(); node && count < 5000; node = walker.nextNode()) {
      const text = norm(node.textContent);
      const parent = node.parentElement;
      if (text.length < 3 || !parent || ["SCRIPT", "STYLE", "NOSCRIPT", "OPTION", "TITLE"].includes(parent.tagName)) continue;
      count++;
      const visible = parent.checkVisibility ? parent.checkVisibility({ visibilityProperty: true })
        : parent.getClientRects().length > 0;
      if (!visible) continue;
      if (!seen.has(text)) seen.set(text, []);
      seen.get(text).push(parent);
    }
    return seen;
  }
  const LIVE = '[role=status], [role=alert], [aria-live], output, [role=dialog], dialog';
  let pending = null; // {id, before, target}
  function begin(target) {
    settle();
    const id = `${prefix}-${++seq}`;
    pending = { id, before: visibleTexts(), target, timer: setTimeout(settle, 1200) };
    return id;
  }
  function settle() {
    if (!pending) return;
    const { id, before, target, timer } = pending;
    clearTimeout(timer);
    pending = null;
    const now = visibleTexts();
    const box = target && target.isConnected ? target.getBoundingClientRect() : null;
    const texts = [];
    const secrets = Array.from(document.querySelectorAll("input")).filter(isPassword).map((f) => f.value).filter((v) => v.length >= 3);
    for (const [text, parents] of now) {
      if (before.has(text) || parents.length !== 1 || secrets.some((v) => text.includes(v))) continue;
      const parent = parents[0];
      let distance = 1e9;
      if (box) {
        const r = parent.getBoundingClientRect();
        distance = Math.hypot((r.left + r.right - box.left - box.right) / 2, (r.top + r.bottom - box.top - box.bottom) / 2);
      }
      texts.push({ text, live: !!parent.closest(LIVE), distance });
    }
    report({ kind: "effects", id, texts: texts.slice(0, 50), url: location.href });
  }

  // ---------------------------------------------------------------- listening
  const lastReported = new WeakMap();
  const dirty = new Set();
  // A field is the person's to report only after a trusted beforeinput (or key press) in it: the
  // browser sends one before typing, pasting, dropping and IME text, and none before a page's own
  // execCommand('insertText'), whose input event is trusted too, or a value a script sets. What is
  // reported is the value the person's last edit left, not what a script wrote after it.
  const armed = new WeakSet();
  const personValue = new WeakMap();
  const valueOf = (el) => (el.isContentEditable ? el.innerText : el.value);
  function flush(el) {
    if (!dirty.has(el)) return;
    dirty.delete(el);
    const value = isPassword(el) ? null : personValue.get(el);
    if (!isPassword(el) && lastReported.get(el) === value) return;
    lastReported.set(el, value);
    const id = begin(el);
    report({ kind: "write", id, target: describe(el), secret: isPassword(el), value, url: location.href });
  }
  function flushAll() { for (const el of Array.from(dirty)) flush(el); }
  const ACTIONABLE = 'a[href], button, input, select, textarea, summary, label, option, [role], [onclick], [tabindex], [contenteditable=""], [contenteditable=true]';

  // only what the person did counts: a page's synthetic input or change event is no edit of theirs
  const arm = (e) => {
    if (!e.isTrusted) return;
    const el = e.composedPath()[0];
    if (el && isTextField(el)) armed.add(el);
  };
  document.addEventListener("beforeinput", arm, true);
  document.addEventListener("keydown", (e) => { if (e.key && e.key.length === 1 && !e.ctrlKey && !e.metaKey) arm(e); }, true);
  document.addEventListener("input", (e) => {
    if (!e.isTrusted) return;
    const el = e.composedPath()[0];
    if (!el || !isTextField(el) || !armed.has(el)) return;
    armed.delete(el);
    personValue.set(el, valueOf(el));
    // the person starts typing into a field: what the previous action changed is read now, before
    // the typing changes the page too (suggestions that appear are not the log-in's doing)
    if (pending && !dirty.has(el)) settle();
    dirty.add(el);
  }, true);
  document.addEventListener("change", (e) => {
    if (!e.isTrusted) return;
    const el = e.composedPath()[0];
    if (!el || !el.tagName) return;
    if (el.tagName === "SELECT") {
      const option = el.selectedOptions[0];
      if (!option) return;
      flushAll();
      const id = begin(el);
      report({ kind: "select", id, target: describe(el), value: option.value, label: norm(option.textContent), url: location.href });
    } else if (isTextField(el) && personValue.has(el)) {
      if (!isPassword(el)) dirty.add(el);
      flush(el);
    }
  }, true);
  document.addEventListener("focusout", (e) => { const el = e.composedPath()[0]; if (el && dirty.has(el)) flush(el); }, true);
  document.addEventListener("click", (e) => {
    if (!e.isTrusted) return;
    const start = e.composedPath()[0];
    const el = start && start.closest ? (start.closest(ACTIONABLE) || start) : null;
    if (!el || !el.tagName) return;
    if (el.tagName === "SELECT" || el.tagName === "OPTION" && el.closest("select")) return;
    if (isTextField(el)) return; // focusing a field: the write that follows targets it
    if (el.tagName === "LABEL" && el.control) return; // the click the label passes to its control is recorded
    // Enter in a form field "clicks" its submit button: the key press is what gets recorded
    if (e.detail === 0 && el !== document.activeElement && !el.contains(document.activeElement)) return;
    flushAll();
    const id = begin(el);
    const box = el.tagName === "INPUT" && ["checkbox", "radio"].includes((el.type || "").toLowerCase());
    report({ kind: "click", id, target: describe(el), clicks: e.detail > 1 ? Math.min(e.detail, 3) : 1, url: location.href,
             checked: box ? el.checked : null, unseen: e.detail > 0 ? unseen(el, e.clientX, e.clientY) : "" });
  }, true);
  // "extract this": Alt+Shift+E over an element (the one under the pointer, else the focused
  // one) records an extract of its text, saved under a name; the page never sees the chord
  let pointed = null;
  document.addEventListener("mousemove", (e) => { if (e.isTrusted) pointed = e.composedPath()[0]; }, true);
  document.addEventListener("keydown", (e) => {
    if (!e.isTrusted || e.code !== "KeyE" || !e.altKey || !e.shiftKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    const el = pointed && pointed.isConnected && pointed.tagName ? pointed
      : (document.activeElement && document.activeElement !== document.body ? document.activeElement : null);
    if (!el) return;
    flushAll();
    const id = begin(el);
    report({ kind: "extract", id, target: describe(el), url: location.href });
  }, true);
  document.addEventListener("keydown", (e) => {
    if (!e.isTrusted || !KEYS.has(e.key) || e.isComposing) return;
    const el = e.composedPath()[0];
    const inText = isTextField(el);
    if (inText && (e.key.startsWith("Arrow") || (e.key === "Enter" && (el.tagName === "TEXTAREA" || el.isContentEditable)))) return;
    flushAll();
    const keys = [];
    if (e.ctrlKey) keys.push("ctrl");
    if (e.altKey) keys.push("alt");
    if (e.metaKey) keys.push("meta");
    if (e.shiftKey) keys.push("shift");
    keys.push(e.key);
    const id = begin(el && el.tagName ? el : null);
    report({ kind: "key", id, keys, target: el && el.tagName && el !== document.body ? describe(el) : null, url: location.href });
  }, true);
  window.addEventListener("pagehide", () => { flushAll(); }, true);
  function texts() {
    const secrets = Array.from(document.querySelectorAll("input")).filter(isPassword).map((f) => f.value).filter((v) => v.length >= 3);
    const out = [];
    for (const [text, parents] of visibleTexts()) {
      if (parents.length === 1 && !secrets.some((v) => text.includes(v))) out.push({ text, live: !!parents[0].closest(LIVE), distance: 1e9 });
    }
    return out;
  }

  // ---------------------------------------------------------------- what the person could not see
  const parentOf = (n) => n.parentElement || (n.parentNode && n.parentNode.host) || null;
  // why the element clicked may not be what the person saw: it is invisible, or something that
  // lets clicks pass through lies over it ("" when neither)
  function unseen(el, x, y) {
    let opacity = 1;
    for (let n = el; n && n.nodeType === Node.ELEMENT_NODE; n = parentOf(n)) {
      const style = getComputedStyle(n);
      opacity *= parseFloat(style.opacity);
      if (n === el && style.visibility !== "visible") return `invisible (visibility: ${style.visibility})`;
    }
    if (opacity < 0.1) return `invisible (opacity ${Math.round(opacity * 100) / 100})`;
    const box = el.getBoundingClientRect();
    if (box.width < 2 || box.height < 2) return `invisible (${Math.round(box.width)}x${Math.round(box.height)} pixels)`;
    let seen = 0;
    for (const other of document.querySelectorAll("body *")) {
      if (++seen > 5000) break;
      if (other === el || other.contains(el) || el.contains(other)) continue;
      const style = getComputedStyle(other);
      if (style.pointerEvents !== "none" || style.visibility !== "visible" || parseFloat(style.opacity) < 0.1) continue;
      if (!["absolute", "fixed", "sticky", "relative"].includes(style.position)) continue;
      const r = other.getBoundingClientRect();
      if (x < r.left || x > r.right || y < r.top || y > r.bottom) continue;
      const paints = style.backgroundColor !== "rgba(0, 0, 0, 0)" || style.backgroundImage !== "none" || norm(other.textContent) !== "";
      const later = el.compareDocumentPosition(other) & Node.DOCUMENT_POSITION_FOLLOWING;
      if (paints && (later || (parseInt(style.zIndex, 10) || 0) > 0)) {
        const words = norm(other.textContent).slice(0, 40);
        return `covered by a ${other.tagName.toLowerCase()}${words ? ` showing "${words}"` : ""} that lets clicks through`;
      }
    }
    return "";
  }

  // ---------------------------------------------------------------- asked by the recorder
  // how many elements a candidate selector finds in this document now: "css", or a role and a
  // name ("role": the name as a part, any case; "role-exact": the whole name)
  function count(kind, a, b) {
    if (kind === "css") { try { return document.querySelectorAll(a).length; } catch (e) { return -1; } }
    const [loose, exact] = roleCounts(a, b);
    return kind === "role-exact" ? exact : loose;
  }
  // a selector that finds the iframe element `owner` alone in its document
  function frameStep(owner) {
    const doc = owner.ownerDocument;
    const one = (sel) => { try { const f = doc.querySelectorAll(sel); return f.length === 1 && f[0] === owner; } catch (e) { return false; } };
    if (owner.id && /^[A-Za-z][\w-]*$/.test(owner.id) && one("iframe#" + owner.id)) return "iframe#" + owner.id;
    for (const attr of ["name", "title"]) {
      const value = owner.getAttribute(attr);
      if (value && one(`iframe[${attr}="${cssq(value)}"]`)) return `iframe[${attr}="${cssq(value)}"]`;
    }
    return `iframe >> nth=${Array.from(doc.querySelectorAll("iframe")).indexOf(owner)}`;
  }
  // the iframe steps from the top document down to this one, as far as same-origin parents let
  // this world see them (complete: up to the top; else `at` is the document where it stopped)
  function framePath() {
    const steps = [];
    let w = window;
    while (w.parent !== w) {
      let owner = null;
      try { owner = w.frameElement; } catch (e) { owner = null; }
      if (!owner || owner.tagName !== "IFRAME") return { steps, complete: false, at: w.location.href };
      steps.unshift(frameStep(owner));
      w = w.parent;
    }
    return { steps, complete: true, at: "" };
  }
  globalThis.__owrlRecorder = { settle, flushAll, texts, count, framePath, doc: prefix };
})();
