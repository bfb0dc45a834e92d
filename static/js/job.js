// The job page: live state, per-GPU charts and the log pane, over /ws/jobs/<id>/.

import { GpuCharts } from "./charts.js";
import { LogPane } from "./logpane.js";
import { el, gettext, interpolate, liveSocket, showState } from "./socket.js";

const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
const root = document.querySelector("[data-job-live]");
const jobId = root.dataset.jobLive;
const seconds = (text) => (text ? Number(text) : null);
// The charts span the job's own lifetime: from its start to its end (or now, while it runs).
const lifetime = { start: seconds(root.dataset.started), end: seconds(root.dataset.finished) };
const charts = new GpuCharts(root.querySelector("[data-charts]"), root.querySelector("[data-gpu-table]"), lifetime);
const history = document.querySelector("[data-job-history]");
const why = document.querySelector("[data-job-why]");
const liveStatus = root.querySelector("[data-live-status]");
const showLive = showState(liveStatus);
let ended = root.dataset.terminal === "1";
const logs = new LogPane(root.querySelector("[data-log]"));
const stateBadge = document.getElementById("job-state");
const historyToggle = root.querySelector("[data-history]");

historyToggle.addEventListener("change", () => charts.setShowAll(historyToggle.checked));

async function loadHistory() {
  const response = await fetch(`/api/v1/jobs/${jobId}/metrics/`, { credentials: "same-origin" });
  if (!response.ok) return;
  const data = await response.json();
  charts.loadHistory(data.gpus);
  const totals = root.querySelector("[data-totals]");
  if (data.totals && totals) {
    const t = data.totals;
    const values = {
      average: t.util_average,
      peak: t.util_peak,
      memory: (t.fb_used_peak / 1024).toFixed(1),
      energy: (t.energy_joules / 3.6e6).toFixed(3),
      hours: t.gpu_hours,
    };
    totals.textContent = interpolate(
      gettext("average %(average)s % · peak %(peak)s % · peak memory %(memory)s GiB · %(energy)s kWh · %(hours)s GPU-hours"),
      values,
      true,
    );
    charts.setHasTotals(true);
  }
}

function time(iso) {
  const at = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

// A state the table does not show yet becomes its newest row. Rows keep the state's code
// (data-state) beside its words, which are in the reader's language.
function addHistory(m) {
  if (!history) return;
  const rows = history.querySelectorAll("tr");
  const last = rows[rows.length - 1];
  if (last?.dataset.state === m.state) return;
  const from = last ? last.children[2].textContent : "—";
  history.append(el("tr", { dataset: { at: m.at, state: m.state } }, el("td", {}, time(m.at)), el("td", {}, from), el("td", {}, m.state_label), el("td", {}, m.reason ?? "")));
}

function showWhy(m) {
  if (!why) return;
  if (!m.pending_code) {
    why.replaceChildren();
    return;
  }
  const parts = [el("strong", { title: m.pending_code }, m.pending_label), `: ${m.pending_reason}`];
  if (m.estimated_start) {
    const at = new Date(m.estimated_start).toLocaleTimeString(document.documentElement.lang || undefined, { hour: "2-digit", minute: "2-digit" });
    parts.push(` · ${gettext("estimated start")} ${at}`);
  }
  const shown = [el("p", { class: "why" }, ...parts)];
  const figures = m.pending_figures ?? {};
  if (figures.queue_position) {
    const text = interpolate(
      gettext("Position %(queue)s in the whole queue, %(team)s in the team's queue"),
      { queue: figures.queue_position, team: figures.team_position },
      true,
    );
    shown.push(el("p", { class: "position", id: "job-position" }, text));
  }
  why.replaceChildren(...shown);
}

function showEnded() {
  if (!liveStatus) return;
  liveStatus.textContent = gettext("ended");
  liveStatus.dataset.state = "ended";
}

const handlers = {
  "job.status": (m) => {
    stateBadge.textContent = m.state_label;
    stateBadge.className = `state ${m.state.toLowerCase()}`;
    addHistory(m);
    showWhy(m);
    if (!TERMINAL.has(m.state)) return;
    ended = true;
    charts.setEnd(Date.parse(m.at) / 1000);
    showEnded();
    document.querySelector("[data-cancel]")?.remove(); // nothing left to cancel
    loadHistory(); // the totals of the whole run
  },
  // A waiting job's new reason, place in the queue or estimate (no change of state).
  "job.waiting": (m) => {
    if (stateBadge.classList.contains("queued")) showWhy(m);
  },
  "job.log": (m) => logs.add(m),
  "job.metrics": (m) => charts.addReadings(m.gpus),
};

loadHistory();
liveSocket(`/ws/jobs/${jobId}/`, {
  onMessage: (m) => handlers[m.type]?.(m),
  // A finished job's stream only brings the log's tail: its badge says so, not "live".
  onState: (state, detail) => (ended && state === "live" ? showEnded() : showLive(state, detail)),
  // Resume the log right after the last chunk shown; a fresh page gets the recent tail.
  query: () => ({ after: logs.lastChunkId }),
});
