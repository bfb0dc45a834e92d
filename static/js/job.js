// The job page: live state, per-GPU charts and the log pane, over /ws/jobs/<id>/.

import { GpuCharts } from "./charts.js";
import { LogPane } from "./logpane.js";
import { gettext, interpolate, liveSocket, showState } from "./socket.js";

const root = document.querySelector("[data-job-live]");
const jobId = root.dataset.jobLive;
const charts = new GpuCharts(root.querySelector("[data-charts]"), root.querySelector("[data-gpu-table]"));
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
      memory: Math.round(t.fb_used_peak),
      energy: (t.energy_joules / 3.6e6).toFixed(3),
      hours: t.gpu_hours,
    };
    totals.textContent = interpolate(
      gettext("average %(average)s % · peak %(peak)s % · peak memory %(memory)s MiB · %(energy)s kWh · %(hours)s GPU-hours"),
      values,
      true,
    );
  }
}

const handlers = {
  "job.status": (m) => {
    stateBadge.textContent = m.state;
    stateBadge.className = `state ${m.state.toLowerCase()}`;
  },
  "job.log": (m) => logs.add(m),
  "job.metrics": (m) => charts.addReadings(m.gpus),
};

loadHistory();
liveSocket(`/ws/jobs/${jobId}/`, {
  onMessage: (m) => handlers[m.type]?.(m),
  onState: showState(root.querySelector("[data-live-status]")),
  // Resume the log right after the last chunk shown; a fresh page gets the recent tail.
  query: () => ({ after: logs.lastChunkId }),
});
