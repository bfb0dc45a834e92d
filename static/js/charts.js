// Per-GPU charts of one job: utilisation, memory, temperature and power, one line per GPU.
// History comes from the minute roll-ups, live points from the websocket; the view shows the
// last 15 minutes, or the whole history on request.

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { el, gettext } from "./socket.js";

const LIVE_WINDOW_S = 15 * 60;
const MAX_POINTS_PER_GPU = 20000;
// Memory arrives in MiB (DCGM's FB_USED) and is shown in GiB.
const METRICS = [
  { key: "util", title: gettext("Utilisation"), unit: "%", range: [0, 100] },
  { key: "fb_used", title: gettext("Memory used"), unit: "GiB", scale: 1 / 1024 },
  { key: "temp", title: gettext("Temperature"), unit: "°C" },
  { key: "power", title: gettext("Power"), unit: "W" },
];
const NUMBER = new Intl.NumberFormat(document.documentElement.lang || undefined, { maximumFractionDigits: 1 });

// Axis ticks as plain numbers with their unit: "40 GiB", never "0,000".
function ticks(unit) {
  return (u, splits) => splits.map((v) => (v === null || v === undefined ? "" : `${NUMBER.format(v)} ${unit}`));
}
const COLOURS = ["#2f6fde", "#1f8a4c", "#c53030", "#b7791f", "#6b46c1", "#0f766e", "#be185d", "#4a5568"];

function gpuName(node, index) {
  return `${node}/gpu${index}`;
}

export class GpuCharts {
  constructor(container, table, lifetime = { start: null, end: null }) {
    this.container = container;
    this.table = table;
    this.lifetime = lifetime;
    this.hasTotals = false;
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

  setHasTotals(value) {
    this.hasTotals = value;
    if (!this.series.size) this.rebuild();
  }

  setEnd(seconds) {
    this.lifetime.end = seconds;
    this.rebuild();
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
    for (const m of METRICS) {
      const v = values[m.key];
      columns[m.key].push(v === null || v === undefined ? null : v * (m.scale ?? 1));
    }
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
      el("td", {}, fb === undefined || fb === null ? "–" : `${NUMBER.format(fb / 1024)} / ${NUMBER.format((total ?? 0) / 1024)} GiB`),
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

  // Never wider than the job's own life: from its start (or first sample) to its end (or now).
  xRange(dataMin, dataMax) {
    const end = this.lifetime.end ?? Math.max(Date.now() / 1000, dataMax ?? 0);
    const start = this.lifetime.start ?? dataMin ?? end - LIVE_WINDOW_S;
    const from = this.showAll || this.lifetime.end ? start : Math.max(start, end - LIVE_WINDOW_S);
    return from < end ? [from, end] : [end - 60, end];
  }

  emptyText() {
    if (this.lifetime.end === null) return gettext("No GPU samples yet.");
    return this.hasTotals
      ? gettext("The run was too short for minute averages: see its totals above.")
      : gettext("No GPU samples were recorded for this job.");
  }

  rebuild() {
    this.pendingRebuild = false;
    for (const { plot } of this.plots) plot.destroy();
    this.container.replaceChildren();
    const names = [...this.series.keys()];
    if (!names.length) {
      this.container.append(el("p", { class: "muted", "data-charts-empty": "" }, this.emptyText()));
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
        axes: [{}, { values: ticks(m.unit), size: 70 }],
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
