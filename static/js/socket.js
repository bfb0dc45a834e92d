// A websocket that reconnects by itself, with backoff, until the server refuses for good.
// The server closes with 4401/4403/4404 when the user may not see the stream: retrying would
// only be refused again, so those end it.

const REFUSED = new Set([4401, 4403, 4404]);
const FIRST_DELAY_MS = 1000;
const MAX_DELAY_MS = 30000;

// Django's JavaScript catalog, when the page loaded it, defines these globals in the user's
// language; without it the English text stands.
export const gettext = globalThis.gettext ?? ((text) => text);
export const ngettext = globalThis.ngettext ?? ((singular, plural, count) => (count === 1 ? singular : plural));
export const interpolate =
  globalThis.interpolate ?? ((format, values) => format.replace(/%\((\w+)\)s/g, (match, name) => String(values[name])));

const STATE_LABELS = {
  connecting: () => gettext("connecting"),
  live: () => gettext("live"),
  refused: () => gettext("refused"),
  reconnecting: (seconds) => interpolate(gettext("reconnecting in %(seconds)s s"), { seconds }, true),
};

export function liveSocket(path, { onMessage, onOpen = () => {}, onState = () => {}, query = () => ({}) }) {
  let delay = FIRST_DELAY_MS;
  let socket = null;
  let stopped = false;

  function url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query())) {
      if (value !== null && value !== undefined) params.set(key, String(value));
    }
    const search = params.toString();
    return `${scheme}//${location.host}${path}${search ? "?" + search : ""}`;
  }

  function open() {
    onState("connecting");
    socket = new WebSocket(url());
    socket.onopen = () => {
      delay = FIRST_DELAY_MS;
      onState("live");
      onOpen();
    };
    socket.onmessage = (event) => onMessage(JSON.parse(event.data));
    socket.onclose = (event) => {
      if (stopped) return;
      if (REFUSED.has(event.code)) {
        onState("refused");
        return;
      }
      // Jitter, so a restarted server is not hit by every browser in the same instant.
      const wait = delay * (0.8 + Math.random() * 0.4);
      delay = Math.min(MAX_DELAY_MS, delay * 2);
      onState("reconnecting", Math.round(wait / 1000));
      setTimeout(open, wait);
    };
  }

  open();
  return {
    close() {
      stopped = true;
      if (socket) socket.close();
    },
  };
}

export function showState(element) {
  return (state, detail) => {
    if (!element) return;
    element.textContent = STATE_LABELS[state](detail);
    element.dataset.state = state;
  };
}

// Builds an element with text content only (never HTML), so log lines and names stay inert.
// `style` is an object of properties, set through the CSSOM: the Content-Security-Policy
// refuses style attributes.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "style") for (const [name, v] of Object.entries(value)) node.style.setProperty(name, v);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}
