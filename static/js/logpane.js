// The live log pane: follows new lines, pauses (keeping what arrives), searches, and remembers
// the last chunk it showed so a reconnect resumes right after it.

import { el, gettext, interpolate, ngettext } from "./socket.js";

const MAX_LINES_SHOWN = 5000; // older lines leave the page; the download has them all

export class LogPane {
  constructor(root) {
    this.output = root.querySelector("[data-log-output]");
    this.follow = root.querySelector("[data-log-follow]");
    this.pause = root.querySelector("[data-log-pause]");
    this.search = root.querySelector("[data-log-search]");
    this.note = root.querySelector("[data-log-note]");
    this.lastChunkId = null;
    this.held = [];
    this.trimmed = 0;
    this.pause.addEventListener("click", () => this.togglePause());
    this.search.addEventListener("input", () => this.applySearch());
  }

  get paused() {
    return this.pause.getAttribute("aria-pressed") === "true";
  }

  add(message) {
    this.lastChunkId = Math.max(this.lastChunkId ?? 0, message.chunk_id);
    const lines = message.lines.map((text, i) => ({ pod: message.pod, number: message.first_line + i, text }));
    if (this.paused) {
      this.held.push(...lines);
      const waiting = ngettext("paused · %(count)s new line waiting", "paused · %(count)s new lines waiting", this.held.length);
      this.note.textContent = interpolate(waiting, { count: this.held.length }, true);
      return;
    }
    this.show(lines);
  }

  show(lines) {
    const needle = this.search.value.toLowerCase();
    const fragment = document.createDocumentFragment();
    for (const line of lines) {
      const row = el("div", { class: "line", dataset: { pod: line.pod } }, el("span", { class: "no" }, line.number), line.text);
      if (needle && !line.text.toLowerCase().includes(needle)) row.hidden = true;
      fragment.append(row);
    }
    this.output.append(fragment);
    while (this.output.childElementCount > MAX_LINES_SHOWN) {
      this.output.firstElementChild.remove();
      this.trimmed += 1;
    }
    if (this.trimmed) {
      const note = ngettext("%(count)s earlier line is in the download", "%(count)s earlier lines are in the download", this.trimmed);
      this.note.textContent = interpolate(note, { count: this.trimmed }, true);
    }
    if (this.follow.checked) this.output.scrollTop = this.output.scrollHeight;
  }

  togglePause() {
    const pausing = !this.paused;
    this.pause.setAttribute("aria-pressed", String(pausing));
    this.pause.textContent = pausing ? gettext("Resume") : gettext("Pause");
    if (!pausing) {
      const held = this.held;
      this.held = [];
      this.note.textContent = "";
      this.show(held);
    }
  }

  applySearch() {
    const needle = this.search.value.toLowerCase();
    for (const row of this.output.children) {
      row.hidden = Boolean(needle) && !row.textContent.toLowerCase().includes(needle);
    }
  }
}
