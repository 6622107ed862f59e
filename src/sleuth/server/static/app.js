// Sleuth web page: ask, watch the steps stream in (fetch + SSE parsing), read the
// answer with numbered citations. No dependencies; all text goes in via textContent.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const state = { strategies: [], sources: [], runs: [], columnSeq: 0, turnSeq: 0, history: [], healthTimer: null };

// The question box speaks the language of the selected source's documents.
const PLACEHOLDERS = {
  en: { first: "Who was president of the United States when the Eiffel Tower was finished?",
        next: "Ask a follow-up, e.g. “And who succeeded him?”" },
  zh: { first: "输入你的问题，例如：这些文件对报销期限有什么规定？", next: "继续追问，例如：那出境的呢？" },
};

// Element.append turns null and undefined into the text "null"/"undefined": leave them out.
function put(node, ...parts) {
  node.append(...parts.filter((x) => x !== null && x !== undefined && x !== false));
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json", Accept: "application/json" };
  const key = $("#apikey").value.trim();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

async function errorText(resp) {
  try {
    const body = await resp.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (_) { /* not JSON */ }
  return `${resp.status} ${resp.statusText}`;
}

// ---------------------------------------------------------------- setup
async function loadHealth() {
  const out = $("#health");
  try {
    const r = await fetch("/healthz");
    const h = await r.json();
    out.textContent = `${h.status} · model ${h.model} · ${h.active}/${h.max_concurrency} running`;
    out.dataset.active = String(h.active);
    out.dataset.status = h.status;
  } catch (e) {
    out.textContent = "server unreachable";
    out.dataset.status = "down";
  }
}

async function loadOptions() {
  const formError = $("#form-error");
  const [s, src] = await Promise.all([
    fetch("/v1/strategies", { headers: headers() }),
    fetch("/v1/sources", { headers: headers() }),
  ]);
  if (s.status === 401) {
    formError.textContent = "This server needs an API key: enter it under Settings.";
    $("#settings").open = true;
    return false;
  }
  if (!s.ok) { formError.textContent = await errorText(s); return false; }
  // Read both bodies before touching the page, so that it goes from the old state to the new
  // one in a single step: no moment with new options beside a stale error.
  const data = await s.json();
  const sources = src.ok ? (await src.json()).sources : null;
  state.strategies = data.strategies;
  const strategy = $("#strategy"), compare = $("#compare");
  const keep = [strategy.value, compare.value];
  strategy.replaceChildren();
  compare.replaceChildren(el("option", { value: "", text: "(none)" }));
  for (const st of data.strategies) {
    strategy.append(el("option", { value: st.name, text: st.name, title: st.description }));
    compare.append(el("option", { value: st.name, text: st.name, title: st.description }));
  }
  strategy.value = keep[0] || data.default;
  if (!strategy.value && data.strategies.length) strategy.value = data.strategies[0].name;
  compare.value = keep[1] || "";
  if (sources) {
    state.sources = sources;
    const sel = $("#source");
    const was = sel.value;
    sel.replaceChildren();
    if (!sources.length) sel.append(el("option", { value: "", text: "(none)" }));
    for (const so of sources) sel.append(el("option", { value: so.name, text: `${so.name}${so.kind ? " (" + so.kind + ")" : ""}` }));
    if (was && sources.some((so) => so.name === was)) sel.value = was;
  }
  setLanguage();
  formError.textContent = "";
  return true;
}

function sourceLang() {
  const so = state.sources.find((x) => x.name === $("#source").value) || state.sources[0];
  return (so && so.lang) || "en";
}

// A sentence the server gives about the chosen source (the quick-start corpus says it is one).
function showSourceNote() {
  const so = state.sources.find((x) => x.name === $("#source").value) || state.sources[0];
  const note = $("#source-note");
  note.textContent = (so && so.note) || "";
  note.hidden = !note.textContent;
}

function setLanguage() {
  showSourceNote();
  const lang = sourceLang();
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  const words = PLACEHOLDERS[lang] || PLACEHOLDERS.en;
  $("#question").placeholder = state.history.length ? words.next : words.first;
}

// The header's run count, read again every second while this page has a run going.
function watchHealth(on) {
  clearInterval(state.healthTimer);
  state.healthTimer = on ? setInterval(loadHealth, 1000) : null;
  loadHealth();
}

// ---------------------------------------------------------------- SSE
// Parses text/event-stream from a fetch body; calls onEvent(name, data) per event.
async function readSSE(response, onEvent, signal) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const flush = (block) => {
    let name = "message";
    const data = [];
    for (const line of block.split(/\r\n|\r|\n/)) {
      if (!line || line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) onEvent(name, data.join("\n"));
  };
  for (;;) {
    if (signal && signal.aborted) break;
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let m;
    while ((m = buffer.match(/\r\n\r\n|\n\n|\r\r/))) {
      flush(buffer.slice(0, m.index));
      buffer = buffer.slice(m.index + m[0].length);
    }
  }
  if (buffer.trim()) flush(buffer);
}

// ---------------------------------------------------------------- columns
function newColumn(strategy) {
  const node = $("#column-template").content.firstElementChild.cloneNode(true);
  const id = "col" + ++state.columnSeq;
  node.id = id;
  const title = $(".column-title", node);
  title.id = id + "-title";
  title.textContent = strategy;
  node.setAttribute("aria-labelledby", title.id);
  const col = { id, node, strategy, draft: "", steps: 0, started: performance.now() };
  setStatus(col, "starting…");
  return col;
}

function setStatus(col, text) {
  $(".column-status", col.node).textContent = text;
}

function clip(s, n = 400) {
  s = String(s ?? "").replace(/\s+/g, " ").trim();
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

const LABELS = {
  start: "Start", llm: "Model call", search: "Search", follow_up: "Follow-up question",
  intermediate_answer: "Intermediate answer", draft: "Draft", revision: "Revision",
  step_back: "Step-back question", reason_in_documents: "Condensed documents", note: "Note",
  answer: "Answer", error: "Error", rerank: "Rerank", rewrite: "Follow-up read as",
};

function addStep(col, ev) {
  const d = ev.data || {};
  const li = el("li", { class: "step step-" + ev.kind });
  const head = el("div", { class: "step-head" },
    el("span", { class: "kind", text: LABELS[ev.kind] || ev.kind.replace(/_/g, " ") }),
    el("span", { class: "time", text: `${Number(ev.t || 0).toFixed(1)} s` }));
  li.append(head);
  const body = el("div", { class: "step-body" });
  switch (ev.kind) {
    case "rewrite": {
      put(body, el("q", { text: clip(d.question, 400) }));
      const dropped = Number(d.dropped_turns || 0);
      if (dropped) put(body, el("span", { class: "tag", text: `${dropped} older turn${dropped === 1 ? "" : "s"} left out` }));
      col.rewritten = d.question || "";
      break;
    }
    case "start":
      put(body, `${d.strategy || col.strategy}`, d.lang ? ` · ${d.lang}` : "");
      break;
    case "llm": {
      const info = `${d.step || "call"} · ${Number(ev.duration_s || 0).toFixed(2)} s` +
        (d.usage ? ` · ${d.usage.completion_tokens ?? "?"} tokens` : "") + (d.from_cache ? " · cached" : "");
      const det = el("details", {}, el("summary", { text: info }), el("pre", { text: d.completion || "" }));
      put(body, det);
      break;
    }
    case "search": {
      const hits = d.passages || [];
      put(body, el("q", { text: clip(d.query, 200) }), ` → ${hits.length} passage${hits.length === 1 ? "" : "s"}`);
      if (hits.length) {
        const ul = el("ul", { class: "hits" });
        for (const p of hits.slice(0, 5)) ul.append(el("li", { text: clip(p.title || p.id, 80) + (p.section ? ` · ${p.section}` : "") }));
        put(body, ul);
      }
      break;
    }
    case "follow_up":
    case "step_back":
      put(body, el("q", { text: clip(d.question || d.text, 400) }));
      break;
    case "intermediate_answer":
      put(body, clip(d.answer || d.text, 400), d.source && d.source !== "search" ? el("span", { class: "tag", text: d.source }) : null);
      break;
    case "draft":
      col.draft = d.text || d.draft || "";
      put(body, el("details", {}, el("summary", { text: clip(col.draft, 120) }), el("p", { class: "pre", text: col.draft })));
      if (d.short_answer) put(body, el("span", { class: "tag", text: "draft answer: " + clip(d.short_answer, 120) }));
      break;
    case "revision":
      put(body, renderRevision(col, d));
      break;
    case "reason_in_documents":
      put(body, renderCondensed(d));
      break;
    case "error":
      put(body, el("strong", { text: d.reason || "error" }), ": ", d.message || "");
      break;
    case "answer":
      put(body, clip(d.answer, 300));
      break;
    default: {
      const text = d.message || d.text || d.question || d.query || "";
      const tag = d.type || d.kind;
      put(body, tag ? el("span", { class: "tag", text: tag }) : null, clip(text, 300) || clip(JSON.stringify(d), 300));
    }
  }
  li.append(body);
  $(".steps", col.node).append(li);
  col.steps += 1;
  setStatus(col, `step ${col.steps}: ${LABELS[ev.kind] || ev.kind}`);
}

// RAT: a unified diff of the draft before and after one revision.
function renderRevision(col, d) {
  const box = el("div", { class: "revision" });
  const title = `revision ${d.step ?? ""}` + (d.query ? ` · searched “${clip(d.query, 100)}”` : "");
  if (d.skipped) {
    put(box, title, el("span", { class: "tag", text: "skipped" }), d.reason ? ` ${d.reason}` : "");
    return box;
  }
  put(box, el("div", {}, title, d.changed === false ? el("span", { class: "tag", text: "unchanged" }) : null));
  const diff = d.diff || "";
  if (diff) {
    const pre = el("pre", { class: "diff", "aria-label": "changes made by this revision" });
    for (const line of diff.split("\n")) {
      if (line.startsWith("+++") || line.startsWith("---")) continue;
      if (line.startsWith("+")) pre.append(el("ins", { text: line.slice(1) }), "\n");
      else if (line.startsWith("-")) pre.append(el("del", { text: line.slice(1) }), "\n");
      else if (line.startsWith("@@")) pre.append(el("span", { class: "hunk", text: line }), "\n");
      else pre.append(line.replace(/^ /, ""), "\n");
    }
    put(box, pre);
  } else if (d.revised || d.text) {
    put(box, el("p", { class: "pre", text: d.revised || d.text }));
  }
  return box;
}

// Search-o1: the documents condensed by the reason-in-documents step.
function renderCondensed(d) {
  const box = el("div", { class: "condensed" });
  if (d.query) put(box, el("div", {}, "for ", el("q", { text: clip(d.query, 200) })));
  const text = d.info ?? d.condensed ?? d.output ?? d.text ?? d.summary ?? "";
  put(box, el("blockquote", { text: text || "(nothing useful in the documents)" }));
  const ids = d.passages || d.documents || [];
  if (ids.length) put(box, el("p", { class: "meta", text: "from " + ids.map((p) => (typeof p === "string" ? p : p.title || p.id)).join(", ") }));
  return box;
}

function provenanceList(p) {
  const dl = el("dl", { class: "prov" });
  const add = (k, v) => { if (v !== undefined && v !== null && v !== "" && !(Array.isArray(v) && !v.length)) dl.append(el("dt", { text: k }), el("dd", { text: Array.isArray(v) ? v.join(", ") : String(v) })); };
  add("source", p.source); add("section", p.section); add("version", p.version); add("region", p.region);
  add("document", p.doc_id); add("passage", p.id); add("url", p.url); add("found by", p.found_by);
  if (p.score) add("score", Number(p.score).toFixed(3));
  return dl;
}

function openCitation(col, n) {
  const det = document.getElementById(`${col.id}-cite-${n}`);
  if (!det) return;
  det.open = true;
  det.scrollIntoView({ block: "nearest" });
  $("summary", det).focus();
}

function renderAnswer(col, text, citations) {
  const p = $(".answer", col.node);
  p.classList.remove("placeholder");
  p.replaceChildren();
  const re = /\[(\d+)\]/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    const n = Number(m[1]);
    p.append(text.slice(last, m.index));
    if (n >= 1 && n <= citations.length) {
      const b = el("button", { type: "button", class: "cite-ref", "aria-label": `source ${n}: ${citations[n - 1].title || citations[n - 1].id}`, text: `[${n}]` });
      b.addEventListener("click", () => openCitation(col, n));
      p.append(b);
    } else p.append(m[0]);
    last = m.index + m[0].length;
  }
  p.append(text.slice(last));
}

function showResult(col, r) {
  col.node.setAttribute("aria-busy", "false");
  const cites = r.citations || [];
  const text = r.answer || r.short_answer || (r.error ? `No answer: ${r.error}` : "No answer.");
  col.answer = (r.answer || r.short_answer || "").trim();
  renderAnswer(col, text, cites);
  const short = $(".short-answer", col.node);
  short.textContent = r.short_answer && r.short_answer !== r.answer ? `Short answer: ${r.short_answer}` : "";
  const u = r.usage || {};
  $(".meta", col.node).replaceChildren(
    el("span", { class: "finish finish-" + r.finish_reason, text: r.finish_reason }),
    ` · ${Number(r.elapsed_s || 0).toFixed(1)} s · ${r.llm_calls} model calls · ${r.searches} searches · ` +
      `${(u.prompt_tokens || 0) + (u.completion_tokens || 0)} tokens · trace ${r.id}`);
  const ol = $(".citations", col.node);
  ol.replaceChildren();
  cites.forEach((p, i) => {
    const n = i + 1;
    const det = el("details", { id: `${col.id}-cite-${n}`, class: "citation" },
      el("summary", {}, el("span", { class: "num", text: `[${n}]` }), " ", p.title || p.doc_id || p.id,
        p.section ? el("span", { class: "sect", text: ` · ${p.section}` }) : null,
        p.version ? el("span", { class: "ver", text: ` · v${p.version}` }) : null),
      provenanceList(p),
      el("blockquote", { class: "passage", text: p.text }));
    ol.append(el("li", {}, det));
  });
  $(".citations-box", col.node).hidden = cites.length === 0;
  setStatus(col, `done: ${r.finish_reason}`);
}

function fail(col, message) {
  col.node.setAttribute("aria-busy", "false");
  const p = $(".answer", col.node);
  p.classList.remove("placeholder");
  p.classList.add("error");
  p.textContent = message;
  setStatus(col, "failed");
}

// ---------------------------------------------------------------- asking
function parseFilters(text) {
  return text.split(/[\s;]+/).map((s) => s.trim()).filter(Boolean);
}

async function runOne(col, body, controller) {
  let resp;
  try {
    resp = await fetch("/v1/ask", {
      method: "POST", headers: { ...headers(), Accept: "text/event-stream" },
      body: JSON.stringify({ ...body, strategy: col.strategy, stream: true }), signal: controller.signal,
    });
  } catch (e) {
    fail(col, controller.signal.aborted ? "Stopped." : `Could not reach the server: ${e.message}`);
    return;
  }
  if (!resp.ok) {
    const msg = await errorText(resp);
    const retry = resp.headers.get("Retry-After");
    fail(col, msg + (retry ? ` (retry in ${retry} s)` : ""));
    return;
  }
  loadHealth();  // the run has started: the header counts it
  let gotResult = false;
  try {
    await readSSE(resp, (name, raw) => {
      const data = JSON.parse(raw);
      if (name === "step") addStep(col, data);
      else if (name === "result") { gotResult = true; showResult(col, data); }
      else if (name === "error") { gotResult = true; fail(col, (data.error && data.error.message) || "The run failed."); }
    }, controller.signal);
  } catch (e) {
    if (!gotResult) fail(col, controller.signal.aborted ? "Stopped." : `The stream broke: ${e.message}`);
    return;
  }
  if (!gotResult) fail(col, controller.signal.aborted ? "Stopped." : "The stream ended without a result.");
}

// One turn of the conversation: the question as asked, then one column per strategy.
function newTurn(question) {
  const n = ++state.turnSeq;
  const turn = el("section", { class: "turn", id: `turn${n}`, "aria-label": `Turn ${n}` });
  turn.append(el("p", { class: "you" }, el("span", { class: "who", text: "You" }), " ", question));
  const cols = el("div", { class: "turn-columns" });
  turn.append(cols);
  return { node: turn, cols };
}

async function ask(ev) {
  ev.preventDefault();
  const formError = $("#form-error");
  formError.textContent = "";
  const question = $("#question").value.trim();
  if (!question) { formError.textContent = "Type a question first."; $("#question").focus(); return; }
  if (!state.strategies.length && !(await loadOptions())) return;
  const chosen = [$("#strategy").value];
  const other = $("#compare").value;
  if (other && other !== chosen[0]) chosen.push(other);
  const body = { question };
  if (state.history.length) body.history = state.history.slice();
  const filters = parseFilters($("#filters").value);
  if (filters.length) body.filters = filters;
  if ($("#source").value) body.index = $("#source").value;
  for (const k of ["k", "max_steps"]) { const v = $("#" + k).value; if (v) body[k] = Number(v); }

  const results = $("#results");
  const turn = newTurn(question);
  turn.cols.classList.toggle("two", chosen.length > 1);
  results.append(turn.node);
  const controller = new AbortController();
  state.controller = controller;
  $("#ask").disabled = true;
  $("#new").disabled = true;
  $("#stop").disabled = false;
  const cols = chosen.map((s) => newColumn(s));
  for (const c of cols) turn.cols.append(c.node);
  watchHealth(true);
  await Promise.all(cols.map((c) => runOne(c, body, controller)));
  watchHealth(false);
  // the conversation goes on from the first column's answer (the server keeps no state: the page sends it)
  const first = cols[0];
  if (first.answer) {
    state.history.push({ role: "user", content: question }, { role: "assistant", content: first.answer });
    $("#question").value = "";
  }
  $("#thread-help").hidden = state.history.length === 0;
  setLanguage();
  $("#ask").disabled = false;
  $("#new").disabled = state.history.length === 0 && !results.children.length;
  $("#stop").disabled = true;
  $("#question").focus();
}

function newConversation() {
  state.history = [];
  $("#results").replaceChildren();
  $("#question").value = "";
  $("#thread-help").hidden = true;
  $("#new").disabled = true;
  setLanguage();
  $("#question").focus();
}

function init() {
  const key = sessionStorage.getItem("sleuth-key");
  if (key) $("#apikey").value = key;
  $("#apikey").addEventListener("change", () => {
    sessionStorage.setItem("sleuth-key", $("#apikey").value.trim());
    loadOptions();
  });
  $("#ask-form").addEventListener("submit", ask);
  $("#question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("#ask-form").requestSubmit(); }
  });
  $("#stop").addEventListener("click", () => { if (state.controller) state.controller.abort(); });
  $("#new").addEventListener("click", newConversation);
  $("#source").addEventListener("change", setLanguage);
  loadHealth();
  loadOptions();
}

document.addEventListener("DOMContentLoaded", init);
