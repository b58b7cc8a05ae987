// mcp-rl dashboard: one page over the JSON API (/api), hash routes, live through server-sent events.
// Text goes into the DOM as text (never as HTML); the charts are SVG the server drew (mcp_rl.svgplot).
"use strict";

const view = document.getElementById("view");
const live = document.getElementById("live");
let events = null; // the EventSource of the run on screen
let listTimer = null;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}
const pct = (v) => (v === null || v === undefined ? "-" : `${Math.round(v * 100)}%`);
const num = (v, d = 3) => (v === null || v === undefined ? "-" : Number(v).toFixed(d));
const enc = encodeURIComponent;

async function api(path) {
  const r = await fetch(`/api/${path}`, { credentials: "same-origin" });
  if (!r.ok) throw new Error(`${path}: ${(await r.json().catch(() => ({}))).error || r.status}`);
  return r.json();
}

function table(head, rows) {
  return h("table", {}, h("tr", {}, head.map((c) => h("th", {}, c))), rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))));
}

function charts(svgs) {
  const box = h("div", { class: "charts" });
  for (const [name, svg] of Object.entries(svgs)) {
    const cell = h("div", { "data-chart": name });
    cell.innerHTML = svg; // drawn by the server from numbers, every label escaped there
    box.append(cell);
  }
  return box;
}

function follow(runId) {
  // One stream per run on screen: each `change` re-reads the view, no reload.
  if (events && events.runId === runId) return;
  if (events) events.close();
  events = new EventSource(`/api/events?run=${enc(runId)}`);
  events.runId = runId;
  let first = true;
  events.addEventListener("change", () => {
    live.textContent = `live: updated ${new Date().toLocaleTimeString()}`;
    if (first) first = false;
    else route();
  });
  events.onerror = () => (live.textContent = "live: reconnecting ...");
}

function stopFollowing() {
  if (events) events.close();
  events = null;
  live.textContent = "";
}

// --- views ----------------------------------------------------------------------------------------
async function runsView() {
  const runs = await api("runs");
  const picked = new Set();
  const button = h("button", { disabled: "", onclick: () => (location.hash = `#/compare/${[...picked].map(enc).join(",")}`) }, "compare selected");
  const rows = runs.map((r) => [
    h("input", { type: "checkbox", onchange: (e) => { e.target.checked ? picked.add(r.id) : picked.delete(r.id); button.disabled = picked.size < 2; } }),
    h("a", { href: `#/run/${enc(r.id)}` }, r.id), r.server, r.model, h("span", { class: "tag", "data-state": r.state }, r.state),
    `${r.steps}${r.max_steps ? " / " + r.max_steps : ""}`, `${pct(r.test_base)} -> ${pct(r.test_best)}`,
  ]);
  return [h("h1", {}, "Runs"), table(["", "run", "server", "model", "state", "steps", "test: base -> best"], rows), h("p", {}, button)];
}

function attemptsOf(attempts) {
  return h("div", { class: "attempts" }, attempts.map((a, i) => episodeCard(a, `attempt ${i + 1}`)));
}

function episodeCard(a, label) {
  const comps = Object.entries(a.reward_components).map(([k, v]) => h("span", { class: "tag" }, `${k} ${num(v, 2)}`));
  const calls = a.calls.map((c) => {
    const clipped = c.result.length > 300;
    const result = clipped ? h("details", {}, h("summary", {}, h("pre", {}, c.result.slice(0, 300) + " ...")), h("pre", {}, c.result)) : h("pre", {}, c.result);
    return h("div", { class: `call ${c.status}` }, h("b", {}, `turn ${c.turn}: ${c.name}`), ` ${c.status}${c.valid ? "" : " (invalid)"}`, h("pre", {}, JSON.stringify(c.arguments)), result);
  });
  return h("div", { class: "attempt", "data-episode": a.id },
    h("h3", {}, `${label}: reward ${num(a.reward)}`),
    h("div", {}, h("span", { class: "tag" }, `${a.turns} turns`), h("span", { class: "tag" }, `end: ${a.end}`),
      h("span", { class: `tag ${a.success ? "yes" : "no"}` }, `success: ${a.success ?? "-"}`),
      h("span", { class: "tag" }, `advantage ${num(a.advantage, 2)}`), h("span", { class: "tag" }, `RULER ${num(a.ruler, 2)}`)),
    a.judge_explanation ? h("p", { class: "why" }, `judge: ${a.judge_explanation}`) : null,
    a.success_explanation ? h("p", { class: "muted" }, `grading: ${a.success_explanation}`) : null,
    h("div", {}, comps), calls,
    h("p", {}, h("b", {}, "final answer: "), a.final_answer ?? h("span", { class: "muted" }, "none")),
  );
}

async function runView(id) {
  follow(id);
  const [run, svgs, tools, tasks, steps] = await Promise.all([
    api(`runs/${enc(id)}`), api(`runs/${enc(id)}/charts`), api(`runs/${enc(id)}/tools`), api(`runs/${enc(id)}/tasks`), api(`runs/${enc(id)}/steps`),
  ]);
  const s = run.summary;
  const step = steps.length ? steps[steps.length - 1] : null;
  const groups = step === null ? [] : await api(`runs/${enc(id)}/steps/${step}/groups`);
  return [
    h("h1", {}, `Run ${s.id}`),
    h("p", {}, `${s.model} on ${s.server}: `, h("span", { class: "tag", id: "run-state" }, s.state),
      h("span", { id: "steps-done", "data-steps": s.steps }, `${s.steps} steps done`), `; best step ${s.best_step ?? "-"}; test ${pct(s.test_base)} -> ${pct(s.test_best)}`),
    h("h2", {}, "Charts"), charts(svgs),
    h("h2", {}, "Tools"), table(["tool", "calls", "invalid", "errors", "success where used"], tools.map((t) => [t.tool, t.calls, t.invalid, t.errors, pct(t.success_where_used)])),
    h("h2", {}, `Groups of step ${step ?? "-"}`),
    steps.length > 1 ? h("p", {}, "steps: ", steps.map((n) => h("a", { href: `#/run/${enc(id)}/step/${n}` }, `${n} `))) : null,
    table(["group", "task", "rewards", "trained"], groups.map((g) => [
      h("a", { href: `#/run/${enc(id)}/step/${step}/group/${enc(g.group_id)}`, "data-group": g.group_id }, g.group_id), g.task_text, g.rewards.map((r) => num(r, 2)).join(" "), g.trained ? "yes" : "no (flat)"])),
    h("h2", {}, "Tasks"),
    table(["task", "split", "grounded", "text", "pass rate (train steps)", "base", "current"], tasks.map((t) => [
      t.split === "train" ? t.id : h("a", { href: `#/run/${enc(id)}/task/${enc(t.id)}` }, t.id), t.split, t.grounded ? "yes" : "no", t.text,
      t.attempted_steps ? `${pct(t.pass_rate)} of ${t.attempted_steps}` : "-", pct(t.base), pct(t.current)])),
    h("h2", {}, "The rest of the run"),
    h("details", {}, h("summary", {}, "config (secrets masked)"), h("pre", { id: "config" }, JSON.stringify(run.config, null, 2))),
    h("details", {}, h("summary", {}, "the prompt the policy saw"), h("pre", { id: "prompt" }, run.prompt.system_prompt || "(none recorded)")),
  ];
}

async function stepView(id, step) {
  follow(id);
  const groups = await api(`runs/${enc(id)}/steps/${step}/groups`);
  return [h("h1", {}, `Run ${id}, step ${step}`), table(["group", "task", "rewards", "trained"], groups.map((g) => [
    h("a", { href: `#/run/${enc(id)}/step/${step}/group/${enc(g.group_id)}` }, g.group_id), g.task_text, g.rewards.map((r) => num(r, 2)).join(" "), g.trained ? "yes" : "no (flat)"]))];
}

async function groupView(id, step, group) {
  follow(id);
  const g = await api(`runs/${enc(id)}/steps/${step}/groups/${enc(group)}`);
  return [
    h("h1", {}, `Group ${g.group_id} (run ${id}, step ${step})`),
    h("p", {}, h("b", {}, "task: "), g.task_text, " ", h("span", { class: `tag ${g.trained ? "yes" : "no"}` }, g.trained ? "trained" : "not trained (flat rewards)")),
    attemptsOf(g.attempts),
  ];
}

async function taskView(id, task) {
  follow(id);
  const p = await api(`runs/${enc(id)}/tasks/${enc(task)}/base-vs-best`);
  return [
    h("h1", {}, `Task ${p.task_id}: base against best (step ${p.best_step})`),
    h("div", { class: "attempts" }, episodeCard(p.base, "base"), p.best ? episodeCard(p.best, `best (step ${p.best_step})`) : h("p", {}, "the best checkpoint has not run this task yet")),
  ];
}

async function compareView(ids) {
  stopFollowing();
  const c = await api(`compare?runs=${ids.map(enc).join(",")}`);
  return [h("h1", {}, `Compare ${c.runs.join(", ")}`), charts(c.charts)];
}

// --- routing --------------------------------------------------------------------------------------
async function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  clearInterval(listTimer);
  let render;
  if (parts[0] === "run" && parts[2] === "step" && parts[4] === "group") render = () => groupView(parts[1], parts[3], parts[5]);
  else if (parts[0] === "run" && parts[2] === "step") render = () => stepView(parts[1], parts[3]);
  else if (parts[0] === "run" && parts[2] === "task") render = () => taskView(parts[1], parts[3]);
  else if (parts[0] === "run" && parts[1]) render = () => runView(parts[1]);
  else if (parts[0] === "compare") render = () => compareView(parts[1].split(","));
  else {
    stopFollowing();
    listTimer = setInterval(route, 5000);
    render = runsView;
  }
  try {
    const nodes = await render();
    view.replaceChildren(...nodes.filter(Boolean));
    document.body.dataset.view = parts[0] || "runs";
  } catch (err) {
    view.replaceChildren(h("p", { class: "no", id: "error" }, String(err.message || err)));
  }
}

window.addEventListener("hashchange", route);
route();
