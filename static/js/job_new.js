// The submit form: before submitting, ask the dry-run API whether the job would be accepted,
// whether it fits the team's quota and the member's cap, and what reason and estimated start
// it would get. Problems appear beside their fields, all at once; nothing is written.

import { gettext, interpolate } from "./socket.js";

const form = document.querySelector("[data-job-form]");
const preview = form.querySelector("[data-preview]");
const previewText = form.querySelector("[data-preview-text]");
const DELAY_MS = 400;
let timer = null;
let asked = 0;

// Words as a POSIX shell splits them (what the server's shlex.split does), or null where a
// quote is left open.
export function shellWords(text) {
  const words = [];
  let word = null;
  let quote = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && i + 1 < text.length && '"\\$`'.includes(text[i + 1])) word += text[++i];
      else word += c;
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word ??= "";
      if (c === "'" || c === '"') quote = c;
      else if (c === "\\" && i + 1 < text.length) word += text[++i];
      else word += c;
    }
  }
  if (quote) return null;
  if (word !== null) words.push(word);
  return words;
}

function value(name) {
  const field = form.elements.namedItem(name);
  return field ? field.value.trim() : "";
}

function number(name, fallback) {
  const text = value(name);
  return text === "" ? fallback : Number(text);
}

// The spec the form would submit, as the API takes it, and the problems found building it.
function specOf() {
  const problems = {};
  const words = (name) => {
    const split = shellWords(value(name));
    if (split === null) problems[name] = gettext("has unbalanced quotes");
    return split ?? [];
  };
  const env = {};
  for (const line of value("env").split("\n")) {
    if (!line.trim()) continue;
    const at = line.indexOf("=");
    env[(at < 0 ? line : line.slice(0, at)).trim()] = at < 0 ? "" : line.slice(at + 1);
  }
  const spec = {
    team: value("team"),
    name: value("name"),
    image: value("image"),
    command: words("command"),
    args: words("args"),
    env,
    gpu_type: value("gpu_type"),
    gpus_per_node: number("gpus_per_node", 1),
    nodes: number("nodes", 1),
    memory: value("memory") || "16Gi",
  };
  for (const name of ["queue", "cpu", "max_runtime"]) {
    if (value(name) !== "") spec[name] = name === "max_runtime" ? Number(value(name)) : value(name);
  }
  return { spec, problems };
}

function showErrors(errors) {
  for (const slot of form.querySelectorAll("[data-error-for]")) {
    const name = slot.dataset.errorFor;
    const messages = errors[name];
    slot.textContent = messages ? [].concat(messages).join(" · ") : "";
    slot.closest(".field")?.classList.toggle("invalid", Boolean(messages));
    const input = form.elements.namedItem(name);
    if (input?.setAttribute) {
      if (messages) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    }
  }
}

function at(iso) {
  return new Date(iso).toLocaleString(document.documentElement.lang || undefined, {
    dateStyle: "short",
    timeStyle: "short",
  });
}

function describe(answer) {
  const lines = [];
  const quota = answer.fits.quota;
  const figures = { used: quota.used, requested: quota.requested, limit: quota.limit, type: quota.gpu_type };
  lines.push(
    quota.fits
      ? interpolate(gettext("Within the team's quota: %(used)s %(type)s GPUs in use + %(requested)s requested, limit %(limit)s."), figures, true)
      : interpolate(gettext("Over the team's quota: %(used)s %(type)s GPUs in use + %(requested)s requested, limit %(limit)s."), figures, true),
  );
  const cap = answer.fits.cap;
  if (cap) {
    const capFigures = { used: cap.used, requested: cap.requested, cap: cap.cap };
    lines.push(
      cap.fits
        ? interpolate(gettext("Within your cap: %(used)s in use + %(requested)s requested, cap %(cap)s."), capFigures, true)
        : interpolate(gettext("Over your cap: %(used)s in use + %(requested)s requested, cap %(cap)s."), capFigures, true),
    );
  }
  if (answer.starts_now) lines.push(gettext("It would start now."));
  else {
    const reason = answer.reason ? answer.reason.message : gettext("no reason given");
    lines.push(interpolate(gettext("It would wait: %(reason)s"), { reason }, true));
    const start = answer.estimated_start;
    lines.push(
      start && start.earliest
        ? interpolate(gettext("Estimated start: %(when)s."), { when: at(start.earliest) }, true)
        : gettext("No estimated start yet."),
    );
  }
  return lines.join(" ");
}

function show(text, state) {
  preview.hidden = false;
  preview.dataset.state = state;
  previewText.textContent = text;
}

async function check() {
  if (value("spec_yaml")) {
    show(gettext("A pasted spec is checked when you submit it."), "unknown");
    return;
  }
  const { spec, problems } = specOf();
  if (Object.keys(problems).length) {
    showErrors(problems);
    show(gettext("Fix the fields marked to see whether the job fits."), "invalid");
    return;
  }
  const mine = ++asked;
  const token = form.elements.namedItem("csrfmiddlewaretoken").value;
  let response;
  try {
    response = await fetch("/api/v1/jobs/dry-run/", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": token },
      body: JSON.stringify(spec),
    });
  } catch {
    if (mine === asked) show(gettext("The check could not reach the portal; you can still submit."), "unknown");
    return;
  }
  if (mine !== asked) return; // a newer check is on its way
  const answer = await response.json().catch(() => ({}));
  if (response.status === 400) {
    showErrors(answer);
    show(gettext("Fix the fields marked to see whether the job fits."), "invalid");
  } else if (response.ok) {
    showErrors({});
    show(describe(answer), answer.starts_now ? "starts" : "waits");
  } else {
    show(gettext("The check is not available now; you can still submit."), "unknown");
  }
}

function later() {
  clearTimeout(timer);
  timer = setTimeout(check, DELAY_MS);
}

form.addEventListener("change", later);
form.addEventListener("input", (event) => {
  if (event.target.type === "number" || event.target.tagName === "SELECT") later();
});
if (value("name") && value("image")) later(); // a cloned job's spec: tell at once
