// grumem's trajectory viewer. Every record is JSON in a <script type="application/json">
// element of this page; text from transcripts reaches the document through text nodes
// only (el() and its append), never as markup.
"use strict";
(function () {
  const index = JSON.parse(document.getElementById("grumem-index").textContent);
  const app = document.getElementById("app");
  const filters = { query: "", session: "", sample: "", r_format: "", exit: "", aborted: "" };
  const records = new Map();

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("data-") || k === "href" || k === "title" || k === "for") {
        e.setAttribute(k, String(v));
      } else e[k] = v;
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function record(row) {
    if (!records.has(row.el)) {
      records.set(row.el, JSON.parse(document.getElementById(row.el).textContent));
    }
    return records.get(row.el);
  }

  function section(sha) {
    const node = document.getElementById("s" + sha);
    return node === null ? null : JSON.parse(node.textContent);
  }

  function num(x) {
    return x === null || x === undefined ? "null" : Number(x).toFixed(3).replace(/\.?0+$/, "");
  }

  function yesNo(gate, yes, no) {
    return gate === null ? "none (unparsed)" : gate ? yes : no;
  }

  // ------------------------------------------------------------ the list

  function distinct(key) {
    return [...new Set(index.rows.map((r) => String(r[key])))].sort();
  }

  function matches(row) {
    return (
      (!filters.query || row.query_id === filters.query) &&
      (!filters.session || row.session.includes(filters.session)) &&
      (!filters.sample || String(row.sample) === filters.sample) &&
      (!filters.r_format || String(row.r_format) === filters.r_format) &&
      (!filters.exit || row.exit === filters.exit) &&
      (!filters.aborted || String(row.aborted === null ? "none" : row.aborted) === filters.aborted)
    );
  }

  function select(name, label, values) {
    const s = el("select", { id: "filter-" + name, "data-filter": name });
    s.append(el("option", { value: "" }, "any"));
    for (const v of values) s.append(el("option", { value: v, selected: filters[name] === v }, v));
    s.addEventListener("change", () => {
      filters[name] = s.value;
      renderRows();
    });
    return el("label", { for: "filter-" + name }, label + " ", s);
  }

  function header() {
    const strata = el(
      "table",
      { class: "strata" },
      el("tr", {}, el("th", {}, "r_exit"), el("th", {}, "r_format"), el("th", {}, "aborted"),
        el("th", {}, "in the corpus"), el("th", {}, "shown")),
      index.strata.map((s) =>
        el("tr", {}, el("td", {}, s.exit), el("td", {}, s.r_format), el("td", {}, s.aborted),
          el("td", {}, s.corpus), el("td", {}, s.shown)))
    );
    const sampled = index.shown < index.trajectories;
    return el(
      "header",
      { class: "page" },
      el("h1", {}, "Trajectories of " + index.project),
      el(
        "p",
        { id: "counts" },
        `${index.shown} of ${index.trajectories} trajectories of the corpus shown` +
          (sampled ? " (a sample: each stratum below in turn, by sha256 of the trajectory id," +
            " within the page's size)" : "") +
          (index.not_exported ? `; ${index.not_exported} aborted before their first answer` +
            " (in the log, not in the corpus) are not shown" : "") +
          "."
      ),
      el("details", { class: "strata" }, el("summary", {}, "strata"), strata)
    );
  }

  let listBody = null;
  let listCount = null;

  function renderList() {
    app.replaceChildren();
    app.append(header());
    const bar = el(
      "div",
      { class: "filters" },
      select("query", "query", distinct("query_id")),
      el("label", { for: "filter-session" }, "session ",
        el("input", { id: "filter-session", "data-filter": "session", type: "search",
          value: filters.session, placeholder: "part of a session name" })),
      select("sample", "sample", distinct("sample")),
      select("r_format", "r_format", distinct("r_format")),
      select("exit", "r_exit", distinct("exit")),
      select("aborted", "aborted", [...new Set(index.rows.map((r) => r.aborted === null ?
        "none" : r.aborted))].sort())
    );
    bar.querySelector("input").addEventListener("input", (e) => {
      filters.session = e.target.value;
      renderRows();
    });
    listCount = el("p", { id: "listed" });
    listBody = el("tbody");
    const table = el(
      "table",
      { class: "list" },
      el("thead", {}, el("tr", {}, ["trajectory", "query", "session", "sample", "turns",
        "gate = label", "r_format", "r_exit", "aborted"].map((h) => el("th", {}, h)))),
      listBody
    );
    app.append(bar, listCount, table);
    renderRows();
  }

  function renderRows() {
    const rows = index.rows.filter(matches);
    listCount.textContent = `${rows.length} listed`;
    listBody.replaceChildren(
      ...rows.map((r) =>
        el("tr", { class: "row", "data-id": r.id },
          el("td", {}, el("a", { href: "#" + r.el, class: "open" }, r.id)),
          el("td", {}, r.query_id), el("td", {}, r.session), el("td", {}, r.sample),
          el("td", {}, r.turns), el("td", {}, `${r.agree} of ${r.turns}`),
          el("td", {}, r.r_format),
          el("td", {}, r.r_exit === null ? r.exit : `${num(r.r_exit)} (${r.exit})`),
          el("td", {}, r.aborted === null ? "" : r.aborted))
      )
    );
  }

  // ------------------------------------------------------------ one trajectory

  function memoryView(turn) {
    const pre = el("pre", { class: "memory-text" });
    if (turn.memory_empty) pre.append(el("span", { class: "none" }, "No previous memory"));
    for (const [op, text] of turn.memory) {
      if (op === "=") pre.append(text);
      else if (op === "+") pre.append(el("ins", {}, text));
      else pre.append(el("del", {}, text));
    }
    const changed = turn.memory.some(([op]) => op !== "=");
    return el("div", { class: "memory" },
      el("h4", {}, `memory after t=${turn.t} `,
        el("span", { class: changed ? "changed" : "unchanged" },
          changed ? "(changed since the turn before: added in green, removed struck through)" : "(unchanged)")),
      pre);
  }

  function parseError(e, what) {
    return el("p", { class: "parse-error" }, `${what}: <${e.tag}> `, el("span", { class: "reason" },
      e.reason));
  }

  function turnView(traj, turn) {
    const lastEvidence = traj.t_last_evidence === turn.t;
    const exit = traj.t_exit === turn.t;
    const agree = turn.update_gate === turn.label;
    const sectionText = turn.prompt === null ? section(turn.chunk_sha) : null;
    return el(
      "section",
      { class: "turn" + (lastEvidence ? " last-evidence" : "") + (exit ? " exit" : ""),
        "data-t": turn.t },
      el("h3", {}, `t=${turn.t}`,
        lastEvidence ? el("span", { class: "mark last-evidence-mark" }, "last evidence") : null,
        exit ? el("span", { class: "mark exit-mark" }, "exit") : null),
      el("div", { class: "gates" },
        el("span", { class: "gate update " + (agree ? "agree" : "disagree") },
          "update gate: " + yesNo(turn.update_gate, "yes", "no")),
        el("span", { class: "label" }, "label: " + (turn.label ? "evidence" : "not evidence")),
        el("span", { class: "agreement " + (agree ? "agree" : "disagree") },
          agree ? "✓ agrees" : "✗ disagrees"),
        el("span", { class: "gate exit-gate" }, "exit gate: " + yesNo(turn.exit_gate, "end",
          "continue"))),
      el("p", { class: "rewards" },
        `r_update ${turn.r_update > 0 ? "+1" : "-1"} · advantage ${num(turn.advantage)}` +
          ` (trajectory ${num(turn.advantage_traj)}, turn ${num(turn.advantage_turn)})` +
          ` · asks ${turn.asks}, attempt ${turn.attempt}` +
          (turn.latency_s === null ? "" : `, ${num(turn.latency_s)} s`)),
      turn.earlier_asks.map((a) => a.parse_error ?
        parseError(a.parse_error, `ask ${a.ask} did not parse`) : null),
      turn.parse_error ? parseError(turn.parse_error, "parse failure") : null,
      memoryView(turn),
      turn.think === null ? null :
        el("details", { class: "think" }, el("summary", {}, "think"),
          el("pre", {}, turn.think)),
      el("details", { class: "section" },
        el("summary", {}, sectionText === null ? "the prompt, whole (it does not match the" +
          " template)" : `section (chunk ${turn.chunk_sha.slice(0, 12)}…)`),
        el("pre", {}, sectionText === null ? turn.prompt : sectionText)),
      turn.response === null ? null :
        el("details", { class: "response" }, el("summary", {}, "response, as recorded"),
          el("pre", {}, turn.response))
    );
  }

  function renderTrajectory(row) {
    const traj = record(row);
    app.replaceChildren();
    const exit = traj.r_exit === null ? `null (${traj.r_exit_reason})` :
      `${num(traj.r_exit)} (${row.exit})`;
    app.append(
      el("nav", {}, el("a", { href: "#", id: "back" }, "← all trajectories")),
      el("header", { class: "trajectory", "data-id": traj.id },
        el("h1", {}, traj.id),
        el("p", { class: "question" }, traj.question === null ? "(question not read: the" +
          " prompts do not match the template)" : traj.question),
        el("p", { class: "facts" },
          `query ${traj.query_id} · session ${traj.session} · sample ${traj.sample} · ` +
            `${traj.level} · model ${traj.model}`),
        el("p", { class: "totals" },
          `r_exit ${exit} · r_format ${traj.r_format} · r_outcome null · t_exit ` +
            `${traj.t_exit === null ? "null" : traj.t_exit} · t_last_evidence ` +
            `${traj.t_last_evidence === null ? "null (no evidence)" : traj.t_last_evidence}`)),
      el("div", { class: "timeline" }, traj.turns.map((t) => turnView(traj, t)),
        traj.aborted === null ? null :
          el("section", { class: "turn aborted", "data-t": traj.aborted.t },
            el("h3", {}, `t=${traj.aborted.t}`, el("span", { class: "mark" }, "aborted")),
            el("p", { class: "abort" }, `${traj.aborted.reason}` +
              (traj.aborted.component ? ` (${traj.aborted.component})` : "") + ": ",
            traj.aborted.detail)))
    );
    window.scrollTo(0, 0);
  }

  function route() {
    const name = decodeURIComponent(location.hash.slice(1));
    const row = index.rows.find((r) => r.el === name);
    if (row) renderTrajectory(row);
    else renderList();
  }

  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && location.hash) location.hash = "";
  });
  window.addEventListener("hashchange", route);
  route();
})();
