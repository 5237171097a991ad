// Fulcrum console: websocket events -> page updates. Plotly is served locally (/vendor/plotly.min.js).
const Fulcrum = (() => {
  const handlers = {};
  let socket = null;

  function on(type, fn) { (handlers[type] = handlers[type] || []).push(fn); }

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

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/cluster/`);
    socket.onopen = () => { attempt = 0; state("on", "live updates (websocket connected)"); };
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

  function csrf() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  async function post(url, data) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"X-CSRFToken": csrf(), "Content-Type": "application/json"},
      body: JSON.stringify(data || {}),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error((body.error && body.error.message) || body.detail || response.statusText);
    return body;
  }

  const fmtBytes = (n) => {
    const units = ["B", "KB", "MB", "GB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(1)} ${units[i]}/s`;
  };

  function renderRankings(rows) {
    const body = document.querySelector("#rankings tbody");
    if (!body) return;
    body.innerHTML = "";
    rows.forEach((r) => {
      const tr = document.createElement("tr");
      tr.dataset.broker = r.name;
      const cells = [r.rank, r.name, r.failureDomain, r.state, r.score, r.cpu, r.bandwidthIn, r.bandwidthOut,
                     r.bundles, fmtBytes(r.throughput), `${Math.round(r.msgRate)}/s`,
                     r.reportedAt ? r.reportedAt.slice(11, 19) : "never"];
      cells.forEach((c, i) => {
        const td = document.createElement("td");
        td.textContent = c;
        if (i === 4) td.className = "score";
        if (i === 11) td.className = "reported";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  function dashboard(series) {
    const chart = document.getElementById("cv-chart");
    Plotly.newPlot(chart, [{x: series.at, y: series.cv, mode: "lines", name: "CV"}],
      {margin: {t: 10, r: 10, b: 40, l: 50}, yaxis: {title: {text: "CV of broker usage"}, rangemode: "tozero"},
       xaxis: {title: {text: "time"}}}, {displayModeBar: false, responsive: true});
    on("balancer.load_reported", (p) => {
      renderRankings(p.rankings);
      document.getElementById("cv").textContent = p.cv.toFixed(3);
      document.getElementById("mean").textContent = `${Math.round(p.mean * 100)} %`;
    });
    on("balancer.cv_sampled", (p) => Plotly.extendTraces(chart, {x: [[p.at]], y: [[p.cv]]}, [0], 720));
    on("balancer.decision_made", (p) => {
      const list = document.getElementById("decisions");
      const li = document.createElement("li");
      li.innerHTML = `<time></time> <b></b> <span></span>`;
      li.querySelector("time").textContent = new Date(p.at).toISOString().slice(11, 19);  // UTC, as the page
      li.querySelector("b").textContent = p.strategy;
      li.querySelector("span").textContent = `${p.reason} — ${p.summary}`;
      list.prepend(li);
      while (list.children.length > 10) list.lastChild.remove();
    });
    connect();
  }

  function bundles() {
    const result = document.getElementById("result");
    document.querySelectorAll("button.unload").forEach((button) => {
      button.addEventListener("click", async () => {
        const name = button.dataset.name;
        const owner = button.closest("tr").querySelector(".owner").textContent.trim();
        if (!confirm(`Unload bundle ${name} from ${owner}?\nIts topics disconnect and reconnect to the broker placement chooses.`)) return;
        button.disabled = true;
        result.className = "result";
        result.textContent = `Unloading ${name}…`;
        try {
          const body = await post(`/api/bundles/${button.dataset.id}/unload/`,
            owner === "unassigned" ? {} : {expected_owner: owner});
          result.textContent = `Unloaded ${body.bundle} from ${body.source}; now on ${body.destination || "nobody"}. ${body.explanation}`;
        } catch (err) {
          result.className = "result error";
          result.textContent = `Unload refused: ${err.message}`;
        } finally {
          button.disabled = false;
        }
      });
    });
    document.querySelectorAll("button.split").forEach((button) => {
      button.addEventListener("click", async () => {
        const name = button.dataset.name;
        const owner = button.closest("tr").querySelector(".owner").textContent.trim();
        if (!confirm(`Split bundle ${name} with the configured split algorithm?\nBoth halves are unloaded and placed again.`)) return;
        button.disabled = true;
        try {
          const body = await post(`/api/bundles/${button.dataset.id}/split/`,
            owner === "unassigned" ? {} : {expected_owner: owner});
          result.className = "result";
          result.textContent = `Split ${body.bundle} at ${body.boundaries.join(", ")}; reloading…`;
          setTimeout(() => location.reload(), 800);
        } catch (err) {
          result.className = "result error";
          result.textContent = `Split refused: ${err.message}`;
          button.disabled = false;
        }
      });
    });
    on("balancer.bundle_moved", (p) => {
      const row = document.querySelector(`tr[data-bundle="${CSS.escape(p.target)}"]`);
      if (!row) return;
      row.querySelector(".owner").textContent = p.destination || "unassigned";
      row.classList.add("changed");
    });
    connect();
  }

  function reports() {
    const button = document.getElementById("run-report");
    const result = document.getElementById("result");
    if (button) {
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          const run = await post("/api/reports/");
          result.textContent = `Run ${run.id} queued; Spark takes about half a minute. This page reloads when it ends.`;
        } catch (err) {
          result.className = "result error";
          result.textContent = `Could not start: ${err.message}`;
          button.disabled = false;
        }
      });
    }
    on("balancer.report_changed", (p) => {
      result.textContent = `Run ${p.id}: ${p.status}`;
      if (p.status === "succeeded" || p.status === "failed") location.reload();
    });
    connect();
  }

  function reportCharts(brokerHours, clusterHours) {
    const byBroker = {};
    brokerHours.forEach((r) => { (byBroker[r.broker] = byBroker[r.broker] || []).push(r); });
    const traces = (field) => Object.keys(byBroker).sort().map((b) => ({
      x: byBroker[b].map((r) => r.hour), y: byBroker[b].map((r) => r[field]), name: b, type: "bar"}));
    const layout = (title) => ({margin: {t: 10, r: 10, b: 40, l: 60}, barmode: "group",
      xaxis: {type: "date", title: {text: "hour (UTC)"}}, yaxis: {title: {text: title}}});
    Plotly.newPlot("cpu-chart", traces("cpu_p95"), layout("CPU p95 %"), {displayModeBar: false});
    Plotly.newPlot("throughput-chart", traces("throughput_p95"), layout("bytes/s p95"), {displayModeBar: false});
    Plotly.newPlot("cluster-chart", [{x: clusterHours.map((r) => r.hour), y: clusterHours.map((r) => r.cv),
      type: "bar", name: "CV", width: clusterHours.map(() => 3600 * 1000 * 0.8)}],
      layout("CV of broker usage"), {displayModeBar: false});
  }

  return {dashboard, bundles, reports, reportCharts, on, connect};
})();
