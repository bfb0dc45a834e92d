// A team's live job list and GPUs against quota, over /ws/teams/<slug>/. Used on the team page
// and, once per team, on the dashboard. A (re)connect reloads the snapshot, then applies changes.

import { el, gettext, interpolate, liveSocket, showState } from "./socket.js";

const ACTIVE = new Set(["QUEUED", "ADMITTED", "RUNNING", "PREEMPTED", "NODE_FAILED"]);

function when(iso) {
  if (!iso) return "";
  const minutes = Math.round((new Date(iso) - Date.now()) / 60000);
  if (minutes <= 0) return ` · ${gettext("starting soon")}`;
  return minutes < 90
    ? ` · ${interpolate(gettext("~%(minutes)s min"), { minutes }, true)}`
    : ` · ${interpolate(gettext("~%(hours)s h"), { hours: Math.round(minutes / 60) }, true)}`;
}

// Within a team, waiting jobs go by queue priority, then submission time (DESIGN.md 5).
function queuePositions(jobs) {
  const waiting = jobs
    .filter((j) => j.state === "QUEUED")
    .sort((a, b) => b.queue_priority - a.queue_priority || a.submitted_at.localeCompare(b.submitted_at) || a.job_id - b.job_id);
  return new Map(waiting.map((j, i) => [j.job_id, i + 1]));
}

class TeamLive {
  constructor(root) {
    this.root = root;
    this.slug = root.dataset.teamLive;
    this.jobs = new Map();
    this.jobsBody = root.querySelector("[data-team-jobs]");
    this.usageBody = root.querySelector("[data-team-usage]");
  }

  async load() {
    const response = await fetch(`/api/v1/teams/${this.slug}/live/`, { credentials: "same-origin" });
    if (!response.ok) return;
    const data = await response.json();
    this.jobs = new Map(data.jobs.map((j) => [j.job_id, j]));
    this.renderJobs();
    this.renderUsage(data.usage);
  }

  onMessage(m) {
    if (m.type === "job.status") {
      if (ACTIVE.has(m.state)) this.jobs.set(m.job_id, m);
      else this.jobs.delete(m.job_id);
      this.renderJobs();
    } else if (m.type === "job.waiting") {
      const job = this.jobs.get(m.job_id);
      if (job?.state !== "QUEUED") return; // admitted or gone since: its status came first
      this.jobs.set(m.job_id, { ...job, ...m });
      this.renderJobs();
    } else if (m.type === "team.usage") {
      this.renderUsage(m.rows);
    }
  }

  renderJobs() {
    if (!this.jobsBody) return;
    const jobs = [...this.jobs.values()].sort((a, b) => a.submitted_at.localeCompare(b.submitted_at));
    const positions = queuePositions(jobs);
    const rows = jobs.map((j) =>
      el("tr", { dataset: { jobId: j.job_id } },
        el("td", {}, el("a", { href: `/jobs/${j.job_id}/` }, j.name)),
        el("td", {}, j.owner),
        el("td", {}, `${j.gpus} ${j.gpu_type}`),
        el("td", {}, j.queue),
        el("td", {}, el("span", { class: `state ${j.state.toLowerCase()}` }, j.state_label)),
        el("td", {}, positions.get(j.job_id) ?? ""),
        el("td", {}, j.state === "QUEUED" ? `${j.pending_reason || j.pending_label}${when(j.estimated_start)}` : j.reason),
      ),
    );
    this.jobsBody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "7", class: "muted" }, gettext("No active jobs.")))]));
  }

  renderUsage(rows) {
    if (!this.usageBody) return;
    this.usageBody.replaceChildren(
      ...rows.map((r) => {
        const percent = r.limit ? Math.min(100, Math.round((100 * r.used) / r.limit)) : 0;
        const guaranteed = r.limit ? Math.round((100 * r.guaranteed) / r.limit) : 0;
        const bar = el("div", { class: "bar quota", style: { "--guaranteed": `${guaranteed}%` } }, el("span", { style: { width: `${percent}%` } }));
        return el("tr", { class: r.used > r.guaranteed ? "borrowing" : "" },
          el("td", {}, r.gpu_type), el("td", {}, r.used), el("td", {}, r.guaranteed), el("td", {}, r.limit), el("td", {}, bar));
      }),
    );
  }
}

for (const root of document.querySelectorAll("[data-team-live]")) {
  const team = new TeamLive(root);
  liveSocket(`/ws/teams/${team.slug}/`, {
    onMessage: (m) => team.onMessage(m),
    onOpen: () => team.load(),
    onState: showState(root.querySelector("[data-live-status]")),
  });
}
