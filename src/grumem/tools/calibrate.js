// grumem calibrate-serve's page: one pair at a time, one key an answer. Text from the
// sample reaches the document through text nodes only, never as markup.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const app = document.getElementById("app");
  const KEYS = { y: "yes", n: "no", s: "skip" };
  let state = null;
  let current = null; // the pair shown; null: the page says every pair is answered
  let busy = false;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  async function api(path, body) {
    const opts = { headers: { "X-Grumem-Token": token }, cache: "no-store" };
    if (body !== undefined) {
      opts.method = "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(path, opts);
    if (!r.ok) throw new Error((await r.text()).trim());
    return r.json();
  }

  function progress() {
    const pct = state.n ? Math.round((100 * state.answered) / state.n) : 0;
    return el("div", { class: "progress" },
      el("p", { id: "progress-text" }, `${state.answered} of ${state.n} answered`),
      el("div", { class: "bar" }, el("div", { class: "fill", "data-pct": pct })),
      el("ul", { class: "queries" }, state.queries.map((q) =>
        el("li", { "data-query": q.query_id }, `${q.query_id}: ${q.answered} of ${q.n}`))));
  }

  function keysHelp() {
    return el("p", { class: "keys" },
      el("kbd", {}, "y"), " yes · ", el("kbd", {}, "n"), " no · ", el("kbd", {}, "s"),
      " skip · ", el("kbd", {}, "Backspace"), " back");
  }

  function show(pair, error) {
    app.replaceChildren(
      progress(),
      el("section", { class: "pair", "data-i": pair.i },
        el("p", { class: "where" }, `pair ${pair.i + 1} of ${state.n} · query ${pair.query_id}`,
          ` · session ${pair.session}, chunk ${pair.index}`),
        el("h1", { id: "question" }, pair.question),
        el("p", { class: "ask" }, "Does the chunk itself hold information that helps to answer" +
          " the question?"),
        el("p", { id: "answer" }, pair.answer === null ? "not answered yet" :
          `your answer: ${pair.answer} (press a key to change it)`),
        error ? el("p", { id: "error" }, error) : null,
        keysHelp(),
        el("pre", { id: "chunk" }, pair.chunk)));
    fillBar();
  }

  function fillBar() {
    const fill = app.querySelector(".fill");
    if (fill) fill.style.width = fill.getAttribute("data-pct") + "%";
  }

  function showDone(error) {
    app.replaceChildren(
      progress(),
      el("section", { id: "done" },
        el("h1", {}, `All ${state.n} pairs are answered.`),
        el("p", {}, "Every answer is saved in ", el("code", {}, state.sample),
          ". Stop this server (Ctrl-C) and write the calibration file:"),
        el("pre", { id: "finalize" }, state.finalize),
        error ? el("p", { id: "error" }, error) : null,
        el("p", { class: "keys" }, el("kbd", {}, "Backspace"), " back to the last pair")));
    fillBar();
  }

  async function go(i, error) {
    current = i;
    if (i === null) return showDone(error);
    try {
      show(await api(`/api/pair/${i}`), error);
    } catch (e) {
      app.replaceChildren(el("p", { id: "error" }, `could not load pair ${i + 1}: ${e.message}`));
    }
  }

  function nextAfter(i) {
    for (let k = 1; k <= state.n; k++) {
      const j = (i + k) % state.n;
      if (state.answers[j] === null) return j;
    }
    return null;
  }

  async function answer(value) {
    if (current === null) return;
    busy = true;
    try {
      state = await api("/api/answer", { pair: current, value: value });
      await go(nextAfter(current));
    } catch (e) {
      await go(current, `not saved: ${e.message}`);
    } finally {
      busy = false;
    }
  }

  document.addEventListener("keydown", async (e) => {
    if (busy || e.ctrlKey || e.metaKey || e.altKey || state === null) return;
    if (KEYS[e.key] !== undefined) {
      e.preventDefault();
      await answer(KEYS[e.key]);
    } else if (e.key === "Backspace" || e.key === "ArrowLeft") {
      e.preventDefault();
      busy = true;
      try {
        const at = current === null ? state.n : current;
        if (at > 0) await go(at - 1);
      } finally {
        busy = false;
      }
    }
  });

  (async function start() {
    try {
      state = await api("/api/state");
    } catch (e) {
      app.replaceChildren(el("p", { id: "error" }, `cannot reach calibrate-serve: ${e.message}`));
      return;
    }
    await go(state.first_unanswered);
  })();
})();
