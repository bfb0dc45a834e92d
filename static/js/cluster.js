// The admins' heatmap: every GPU's utilisation, live over /ws/cluster/; Xids as they happen.

import { el, gettext, interpolate, liveSocket, showState } from "./socket.js";

const SILENT_AFTER_S = 60; // no sample for this long: the agent or the node is in trouble
const table = document.getElementById("heatmap");
const xids = document.getElementById("xids");
const lastSeen = new Map();

function cell(node, index) {
  const row = table.querySelector(`tr[data-node="${CSS.escape(node)}"]`);
  return row ? row.querySelector(`td[data-index="${index}"]`) : null;
}

function update(node, gpu) {
  const td = cell(node, gpu.index);
  if (!td) return;
  lastSeen.set(td, gpu.at);
  td.classList.remove("silent");
  td.style.setProperty("--util", gpu.util ?? 0);
  td.querySelector(".util").textContent = gpu.util === null ? "–" : `${Math.round(gpu.util)}%`;
  td.querySelector(".sub").textContent = gpu.temp === null ? "" : `${Math.round(gpu.temp)}°C`;
  td.title = `${node}/gpu${gpu.index}${gpu.job_id ? ` · ${interpolate(gettext("job #%(id)s"), { id: gpu.job_id }, true)}` : ""} · ${Math.round(gpu.power ?? 0)} W`;
}

function xid(m) {
  if (xids.querySelector(".muted")) xids.replaceChildren();
  const at = new Date(m.at * 1000).toLocaleTimeString();
  xids.prepend(el("li", { class: m.fatal ? "error" : "" }, `${at} ${m.node}/gpu${m.index}: Xid ${m.xid}${m.fatal ? ` (${gettext("fatal: GPU out of service")})` : ""}`));
  if (m.fatal) cell(m.node, m.index)?.classList.add("faulty");
}

setInterval(() => {
  const now = Date.now() / 1000;
  for (const [td, at] of lastSeen) td.classList.toggle("silent", now - at > SILENT_AFTER_S);
}, 5000);

liveSocket("/ws/cluster/", {
  onMessage: (m) => {
    if (m.type === "cluster.gpus") m.gpus.forEach((gpu) => update(m.node, gpu));
    else if (m.type === "cluster.xid") xid(m);
  },
  onState: showState(document.getElementById("live-status")),
});
