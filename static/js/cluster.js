// The admins' heatmap: every GPU's utilisation, live over /ws/cluster/; Xids as they happen.

import { el, gettext, interpolate, liveSocket, showState } from "./socket.js";

const SILENT_AFTER_S = 60; // no sample for this long: the agent or the node is in trouble
const table = document.getElementById("heatmap");
// The colour bands of monitoring/heatmap.py: band n holds n × width to (n + 1) × width − 1 percent.
const BAND_WIDTH = Number(table.dataset.bandWidth);
const LAST_BAND = Math.floor(100 / BAND_WIDTH) - 1;
const xids = document.getElementById("xids");
const lastSeen = new Map();

function cell(node, index) {
  const row = table.querySelector(`tr[data-node="${CSS.escape(node)}"]`);
  return row ? row.querySelector(`td[data-index="${index}"]`) : null;
}

function paint(td, util) {
  for (let band = 0; band <= LAST_BAND; band += 1) td.classList.remove(`util-${band}`);
  if (util !== null) td.classList.add(`util-${Math.min(LAST_BAND, Math.floor(util / BAND_WIDTH))}`);
}

// What a screen reader hears beside the figure: the colours' and the stripes' meaning.
function tell(td) {
  const text = td.classList.contains("faulty") ? gettext("faulty") : td.classList.contains("silent") ? gettext("no recent sample") : "";
  td.querySelector(".state-text").textContent = text;
}

function update(node, gpu) {
  const td = cell(node, gpu.index);
  if (!td) return;
  lastSeen.set(td, gpu.at);
  td.classList.remove("silent");
  const util = gpu.util === null || gpu.util === undefined ? null : Math.round(gpu.util);
  paint(td, util);
  tell(td);
  td.querySelector(".util").textContent = util === null ? "–" : `${util}%`;
  td.querySelector(".sub").textContent = gpu.temp === null ? "" : `${Math.round(gpu.temp)}°C`;
  td.title = `${node}/gpu${gpu.index}${gpu.job_id ? ` · ${interpolate(gettext("job #%(id)s"), { id: gpu.job_id }, true)}` : ""} · ${Math.round(gpu.power ?? 0)} W`;
}

function xid(m) {
  if (xids.querySelector(".muted")) xids.replaceChildren();
  const at = new Date(m.at * 1000).toLocaleTimeString();
  xids.prepend(el("li", { class: m.fatal ? "error" : "" }, `${at} ${m.node}/gpu${m.index}: Xid ${m.xid}${m.fatal ? ` (${gettext("fatal: GPU out of service")})` : ""}`));
  const td = m.fatal ? cell(m.node, m.index) : null;
  if (td) {
    td.classList.add("faulty");
    tell(td);
  }
}

setInterval(() => {
  const now = Date.now() / 1000;
  for (const [td, at] of lastSeen) {
    td.classList.toggle("silent", now - at > SILENT_AFTER_S);
    tell(td);
  }
}, 5000);

liveSocket("/ws/cluster/", {
  onMessage: (m) => {
    if (m.type === "cluster.gpus") m.gpus.forEach((gpu) => update(m.node, gpu));
    else if (m.type === "cluster.xid") xid(m);
  },
  onState: showState(document.getElementById("live-status")),
});
