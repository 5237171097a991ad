// Fulcrum console: websocket events -> page updates. The page's one connection to
// /ws/cluster/ (connect), the handlers by event type (on) and the live dot in the header; every
// page module imports them from here, so there is one socket and one set of handlers.

const handlers = {};
let socket = null;

export function on(type, fn) { (handlers[type] = handlers[type] || []).push(fn); }

// Reconnect with exponential backoff and full jitter (0.5 s doubling up to 30 s), and say so:
// the dot and its tooltip show "live", "reconnecting in N s (attempt K)" or "offline".
let attempt = 0;
function state(cls, title) {
  const dot = document.getElementById("live");
  if (dot) { dot.className = `live ${cls}`; dot.title = title; }
  const label = document.getElementById("live-state");
  if (label) label.textContent = cls === "on" ? "" : title;
  document.body.dataset.live = cls === "on" ? "1" : "0";
}

export function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws/cluster/`);
  socket.onopen = () => {
    attempt = 0;
    state("on", "live updates (websocket connected)");
    (handlers["socket.open"] || []).forEach((fn) => fn());  // pages catch up on what they missed
  };
  socket.onclose = () => {
    attempt += 1;
    const ceiling = Math.min(30000, 500 * 2 ** attempt);
    const delay = Math.round(ceiling / 2 + Math.random() * ceiling / 2);
    state("off", `live updates lost; reconnecting in ${(delay / 1000).toFixed(1)} s (attempt ${attempt})`);
    setTimeout(connect, delay);
  };
  socket.onmessage = (msg) => {
    const event = JSON.parse(msg.data);
    (handlers[event.type] || []).forEach((fn) => fn(event.payload));
  };
}

// Refresh a page's data from the API after a live event: at once after a move, at most every
// ``minGapMs`` for load reports.
export function liveRefresh(url, apply, minGapMs) {
  let timer = null, last = 0;
  const run = async () => {
    timer = null; last = Date.now();
    try {
      const response = await fetch(String(url), {credentials: "same-origin"});
      if (response.ok) apply(await response.json());
    } catch (err) { /* the next event retries */ }
  };
  const soon = (delay) => { if (!timer) timer = setTimeout(run, delay); };
  on("balancer.bundle_moved", () => soon(300));
  on("balancer.decision_made", () => soon(300));
  on("balancer.load_reported", () => soon(Math.max(0, minGapMs - (Date.now() - last))));
  return () => soon(0);
}
