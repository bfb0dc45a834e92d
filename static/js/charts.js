// Per-GPU charts of one job: utilisation, memory, temperature and power, one line per GPU.
// History comes from the minute roll-ups, live points from the websocket; the view shows the
// last 15 minutes, or the whole history on request.

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { el, gettext } from "./socket.js";

const LIVE_WINDOW_S = 15 * 60;
const MAX_POINTS_PER_GPU = 20000;
const METRICS = [
  { key: "util", title: gettext("Utilisation"), unit: "%", range: [0, 100] },
  { key: "fb_used", title: gettext("Memory used"), unit: "MiB" },
  { key: "temp", title: gettext("Temperature"), unit: "°C" },
  { key: "power", title: gettext("Power"), unit: "W" },
];
const COLOURS = ["#2f6fde", "#1f8a4c", "#c53030", "#b7791f", "#6b46c1", "#0f766e", "#be185d", "#4a5568"];

function gpuName(node, index) {
  return `${node}/gpu${index}`;
}

export class GpuCharts {
  constructor(container, table) {
    this.container = container;
    this.table = table;
    this.series = new Map(); // gpu name -> {t: [], util: [], ...}
    this.showAll = false;
    this.plots = [];
    this.pending = false;
  }

  loadHistory(gpus) {
    for (const gpu of gpus) {
      const columns = this.columnsOf(gpuName(gpu.node, gpu.index));
      const h = gpu.history;
      // Minute points sit at the middle of their minute.
      h.t.forEach((t, i) => this.push(columns, t + 30, { util: h.util[i], fb_used: h.fb_used[i], temp: h.temp[i], power: h.power[i] }));
      if (gpu.latest) this.updateTable(gpu.node, gpu.index, gpu.latest.DCGM_FI_DEV_GPU_UTIL, gpu.latest);
    }
    this.rebuild();
  }

  addReadings(readings) {
    for (const r of readings) {
      this.push(this.columnsOf(gpuName(r.node, r.index)), r.at, r);
      this.updateTable(r.node, r.index, r.util, r);
    }
    this.schedule();
  }

  setShowAll(value) {
    this.showAll = value;
    this.rebuild();
  }

  columnsOf(name) {
    if (!this.series.has(name)) {
      this.series.set(name, { t: [], util: [], fb_used: [], temp: [], power: [] });
      this.pendingRebuild = true;
    }
    return this.series.get(name);
  }

  push(columns, t, values) {
    if (columns.t.length && t <= columns.t[columns.t.length - 1]) return; // out of order: skip
    columns.t.push(t);
    for (const m of METRICS) columns[m.key].push(values[m.key] ?? null);
    if (columns.t.length > MAX_POINTS_PER_GPU) {
      for (const key of Object.keys(columns)) columns[key].shift();
    }
  }

  updateTable(node, index, util, reading) {
    if (!this.table) return;
    const id = `gpu-row-${node}-${index}`;
    let row = this.table.querySelector(`[id="${CSS.escape(id)}"]`);
    if (!row) {
      row = el("tr", { id });
      this.table.append(row);
    }
    const v = (x, unit) => (x === null || x === undefined ? "–" : `${Math.round(x)} ${unit}`);
    const fb = reading.fb_used ?? reading.DCGM_FI_DEV_FB_USED;
    const total = reading.fb_total ?? reading.DCGM_FI_DEV_FB_TOTAL;
    const sm = reading.sm_active ?? reading.DCGM_FI_PROF_SM_ACTIVE;
    row.replaceChildren(
      el("td", {}, gpuName(node, index)),
      el("td", {}, v(util, "%")),
      el("td", {}, sm === null || sm === undefined ? "–" : `${Math.round(sm * 100)} %`),
      el("td", {}, fb === undefined ? "–" : `${Math.round(fb)} / ${Math.round(total ?? 0)} MiB`),
      el("td", {}, v(reading.temp ?? reading.DCGM_FI_DEV_GPU_TEMP, "°C")),
      el("td", {}, v(reading.power ?? reading.DCGM_FI_DEV_POWER_USAGE, "W")),
    );
  }

  schedule() {
    // Many messages may arrive at once; redraw at most once per animation frame.
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (this.pendingRebuild) this.rebuild();
      else this.redraw();
    });
  }

  tables(metric) {
    return [...this.series.values()].map((c) => [c.t, c[metric]]);
  }

  data(metric) {
    const tables = this.tables(metric);
    if (!tables.length) return [[]];
    return tables.length === 1 ? tables[0] : uPlot.join(tables);
  }

  xRange(dataMin, dataMax) {
    if (this.showAll) return [dataMin, dataMax];
    const now = Date.now() / 1000;
    return [now - LIVE_WINDOW_S, now];
  }

  rebuild() {
    this.pendingRebuild = false;
    for (const { plot } of this.plots) plot.destroy();
    this.container.replaceChildren();
    const names = [...this.series.keys()];
    if (!names.length) {
      this.container.append(el("p", { class: "muted" }, gettext("No GPU samples yet.")));
      this.plots = [];
      return;
    }
    const width = Math.max(280, Math.min(560, this.container.clientWidth / 2 - 16));
    this.plots = METRICS.map((m) => {
      const box = el("div", { class: "chart" });
      this.container.append(box);
      const options = {
        title: `${m.title} (${m.unit})`,
        width,
        height: 180,
        scales: { x: { time: true, range: (u, min, max) => this.xRange(min, max) }, y: m.range ? { range: m.range } : {} },
        series: [{}, ...names.map((name, i) => ({ label: name, stroke: COLOURS[i % COLOURS.length], spanGaps: false }))],
        legend: { show: names.length <= 8 },
      };
      return { metric: m.key, plot: new uPlot(options, this.data(m.key), box) };
    });
  }

  redraw() {
    for (const { metric, plot } of this.plots) plot.setData(this.data(metric));
  }
}
