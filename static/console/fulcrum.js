// Fulcrum console: websocket events -> page updates. Plotly is served locally (/vendor/plotly-<digest>.min.js):
// a partial bundle of the trace types drawn here (js/plotly-fulcrum.js); a new type needs `make plotly`.
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
    if (!response.ok) {
      // Ours: {"error": {"message", "field"}}; DRF's field errors: {"field": ["message"]}.
      const fields = Object.entries(body).filter(([, v]) => Array.isArray(v))
        .map(([k, v]) => `${k}: ${v.join(" ")}`).join("; ");
      const err = new Error((body.error && body.error.message) || body.detail || fields || response.statusText);
      err.field = body.error ? body.error.field : null;  // the input at fault, to mark it
      throw err;
    }
    return body;
  }

  async function get(url) {
    const response = await fetch(url, {credentials: "same-origin"});
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error((body.error && body.error.message) || body.detail || response.statusText);
    return body;
  }

  // A replay's comparison: a table of each run's figures and, above one another, its CV and
  // max / mean over time. ``runs``: [[label, run (its summary and points), colour]]; a run
  // without moves (what was recorded) shows "—" there.
  function replayCompare(body, chartId, runs) {
    const fixed = (v, n) => (v === null || v === undefined ? "—" : v.toFixed(n));
    const rows = [
      ["median CV", (r) => fixed(r.cvMedian, 3)],
      ["median max / mean", (r) => fixed(r.maxOverMeanMedian, 2)],
      ["p95 max / mean", (r) => fixed(r.maxOverMeanP95, 2)],
      ["moves (per hour)", (r) => (r.moves === undefined ? "—" : `${r.moves} (${r.movesPerHour.toFixed(1)}/h)`)],
      ["moved back within the hour", (r) => (r.oscillations === undefined ? "—" : String(r.oscillations))],
      ["vetoed", (r) => (r.vetoed === undefined ? "—" : String(r.vetoed))],
      ["splits planned (not applied)", (r) => (r.splitsPlanned === undefined ? "—" : String(r.splitsPlanned))],
      ["cycles × interval", (r) => (r.cycles === undefined ? "—" : `${r.cycles} × ${r.intervalS.toFixed(0)} s`)],
    ];
    body.innerHTML = "";
    rows.forEach(([label, value]) => {
      const tr = el("tr");
      tr.appendChild(el("th", {}, label));
      runs.forEach(([, r]) => tr.appendChild(el("td", {}, value(r))));
      body.appendChild(tr);
    });
    const line = (r, name, color, key, axis, dotted) => ({type: "scatter", mode: "lines", name, x: r.at, y: r[key],
      line: {color, width: dotted ? 1.5 : 2, dash: dotted ? "dot" : "solid"},
      xaxis: "x", yaxis: axis, legendgroup: name, showlegend: axis === "y"});
    const traces = [];
    runs.forEach(([name, r, color], i) => {
      traces.push(line(r, name, color, "cv", "y", i === 0), line(r, name, color, "maxOverMean", "y2", i === 0));
    });
    Plotly.react(chartId, traces, {
      margin: {t: 10, r: 20, b: 40, l: 60}, height: 420, legend: {orientation: "h"}, hovermode: "x unified",
      grid: {rows: 2, columns: 1, shared_xaxes: true},
      xaxis: {type: "date", title: {text: "time (UTC)"}, anchor: "y2"},
      yaxis: {title: {text: "CV of broker usage"}, rangemode: "tozero", domain: [0.55, 1]},
      yaxis2: {title: {text: "max / mean"}, rangemode: "tozero", domain: [0, 0.45]},
    }, {displayModeBar: false, responsive: true});
  }

  // Binary units, as the core's explanations write them.
  const fmtBytes = (n) => {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${i ? n.toFixed(1) : Math.round(n)} ${units[i]}/s`;
  };

  // A list of brokers shown a page at a time, whatever the cluster's size: ``filter`` keeps the
  // rows whose name, failure domain or state contains the text (any case); the text and the page
  // live in the address (?q=, ?page=) so a reload or a link keeps them.
  function brokerPager(prefix, size, redraw) {
    const params = new URLSearchParams(location.search);
    const view = {q: (params.get("q") || "").slice(0, 200), page: Math.max(1, parseInt(params.get("page"), 10) || 1)};
    const input = document.getElementById(`${prefix}-filter`);
    const text = document.getElementById(`${prefix}-page`);
    const previous = document.getElementById(`${prefix}-previous`);
    const next = document.getElementById(`${prefix}-next`);
    if (input) input.value = view.q;
    const remember = () => {
      const url = new URL(location.href);
      if (view.q) url.searchParams.set("q", view.q); else url.searchParams.delete("q");
      if (view.page > 1) url.searchParams.set("page", view.page); else url.searchParams.delete("page");
      history.replaceState(null, "", url);
    };
    if (input) input.addEventListener("input", () => { view.q = input.value.slice(0, 200); view.page = 1; remember(); redraw(); });
    if (previous) previous.addEventListener("click", () => { view.page -= 1; remember(); redraw(); });
    if (next) next.addEventListener("click", () => { view.page += 1; remember(); redraw(); });
    const matches = (r) => {
      const q = view.q.trim().toLowerCase();
      return !q || [r.name, r.failureDomain || "default", r.state].some((v) => String(v).toLowerCase().includes(q));
    };
    // ``rows``: every broker; returns the page's rows and says which they are.
    function page(rows) {
      const kept = rows.filter(matches);
      const pages = Math.max(1, Math.ceil(kept.length / size));
      view.page = Math.min(Math.max(1, view.page), pages);
      const first = (view.page - 1) * size;
      const shown = kept.slice(first, first + size);
      if (text) {
        const which = kept.length ? `brokers ${first + 1}–${first + shown.length} of ${kept.length}` : "no broker";
        text.textContent = `${which}${view.q ? ` whose name, domain or state contains “${view.q}”` : ""}` +
          `${kept.length < rows.length ? ` (${rows.length} in all)` : ""}; page ${view.page} of ${pages}`;
      }
      if (previous) previous.disabled = view.page <= 1;
      if (next) next.disabled = view.page >= pages;
      return shown;
    }
    return {page, matches, view};
  }

  // The rankings, a page at a time, redrawn in place; a broker whose rank changed slides from its
  // old row to its new one and is marked for a moment.
  function renderRankings(rows) {
    const body = document.querySelector("#rankings tbody");
    if (!body) return;
    if (rankingsPager) rows = rankingsPager.page(rows);
    const before = new Map([...body.querySelectorAll("tr")].map((tr) =>
      [tr.dataset.broker, {top: tr.getBoundingClientRect().top, rank: tr.firstChild && tr.firstChild.textContent}]));
    body.innerHTML = "";
    rows.forEach((r) => {
      const tr = document.createElement("tr");
      tr.dataset.broker = r.name;
      const cells = [r.rank, r.name, r.failureDomain, r.state, r.score, r.cpu, r.bandwidthIn, r.bandwidthOut,
                     r.bundles, fmtBytes(r.throughput), `${Math.round(r.msgRate)}/s`,
                     r.reportedAt ? r.reportedAt.slice(11, 19) : "never"];
      cells.forEach((c, i) => {
        const td = document.createElement("td");
        if (i === 1) td.appendChild(el("a", {href: `/brokers/${encodeURIComponent(c)}/`}, c));
        else td.textContent = c;
        if (i === 4) td.className = "score";
        if (i === 11) td.className = "reported";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    if (!rows.length) body.appendChild(el("tr")).appendChild(el("td", {colspan: 12, class: "muted"}, "no broker shown"));
    body.querySelectorAll("tr[data-broker]").forEach((tr) => {
      const name = tr.dataset.broker, old = before.get(name);
      if (old && old.rank !== String(tr.firstChild.textContent)) {
        const shift = old.top - tr.getBoundingClientRect().top;
        tr.animate([{transform: `translateY(${shift}px)`}, {transform: "translateY(0)"}],
          {duration: 600, easing: "ease-out"});
        reranked.set(name, Date.now() + 2000);
        setTimeout(() => {
          const row = body.querySelector(`tr[data-broker="${CSS.escape(name)}"]`);
          if (row && (reranked.get(name) || 0) <= Date.now()) row.classList.remove("reranked");
        }, 2050);
      }
      // The mark outlives a redraw within its two seconds.
      if ((reranked.get(name) || 0) > Date.now()) tr.classList.add("reranked");
    });
  }
  const reranked = new Map();  // broker -> until when (ms) its row stays marked
  let rankingsPager = null;  // the dashboard's pages of brokers

  // The decision list: acting decisions, and runs of quiet cycles as one line with a count.
  function renderFeed(list, feed) {
    list.innerHTML = "";
    if (!feed.length) list.appendChild(el("li", {class: "muted"}, "none yet"));
    feed.forEach((item) => {
      if (item.type === "quiet") {
        const span = item.count > 1 ? `${utc(item.first).slice(11, 19)}–${utc(item.last).slice(11, 19)}` : utc(item.last).slice(11, 19);
        list.appendChild(el("li", {class: "quiet", "data-quiet": item.count},
          `${item.count} quiet cycle${item.count > 1 ? "s" : ""} (${item.reason}), ${span}`));
        return;
      }
      const li = el("li", {"data-decision": item.id});
      li.appendChild(el("time", {}, utc(item.at).slice(11, 19)));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("b", {}, item.kind === "operator" ? "operator" : item.strategy));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("a", {href: `/decisions/${item.id}/`}, `${item.reason} — ${item.summary}`));
      list.appendChild(li);
    });
  }

  // The balance panel: the optimality gauge, the move budget, the cool-down, oscillations and
  // why the latest cycle held.
  function showBalance(b) {
    const gauge = document.getElementById("optimality");
    if (b.optimality) {
      gauge.textContent = `${b.optimality.ratio.toFixed(2)}× optimal`;
      gauge.title = `max/mean ${b.optimality.maxOverMean.toFixed(2)} now, ${b.optimality.optimumMaxOverMean.toFixed(2)} at best (${utc(b.optimality.at)})`;
      gauge.className = b.optimality.ratio > 1.1 ? "warn" : "";
    }
    const budget = document.getElementById("budget");
    budget.textContent = b.budget.limit === null ? `${b.budget.used} (no limit)` : `${b.budget.used} / ${b.budget.limit}`;
    budget.className = b.budget.limit !== null && b.budget.used >= b.budget.limit ? "warn" : "";
    const next = b.coolDown.next[0];
    document.getElementById("cooling").textContent = b.coolDown.bundles
      ? `${b.coolDown.bundles} bundle(s) wait; next eligible in ${Math.ceil(next.inS)} s (${next.bundle})`
      : `none waits (${Math.round(b.coolDown.seconds)} s after a move)`;
    document.getElementById("oscillation-count").textContent = String(b.oscillations.length);
    const bounces = document.getElementById("bounces");
    bounces.innerHTML = "";
    b.oscillations.slice(0, 5).forEach((o) => {
      const li = el("li", {class: "alert"});
      li.appendChild(el("span", {}, `${utc(o.at).slice(11, 19)} ${o.bundle} went back to ${o.broker}, which it left at ${utc(o.leftAt).slice(11, 19)} `));
      if (o.decision) li.appendChild(el("a", {href: `/decisions/${o.decision}/`}, "decision"));
      bounces.appendChild(li);
    });
    document.getElementById("flip-flop-count").textContent = String(b.flipFlops.length);
    b.flipFlops.slice(0, 5).forEach((f) => {
      const li = el("li", {class: "alert"});
      li.appendChild(el("span", {}, `${utc(f.at).slice(11, 19)} ${f.broker} flip-flops: ${f.pattern} since ${utc(f.firstAt).slice(11, 19)} `));
      if (f.decision) li.appendChild(el("a", {href: `/decisions/${f.decision}/`}, "decision"));
      bounces.appendChild(li);
    });
    const quiet = document.getElementById("quiet");
    const held = b.quiet && b.quiet.skipped.length ? b.quiet.skipped : [];
    quiet.hidden = !held.length;
    quiet.textContent = held.length
      ? `Why nothing moved at ${utc(b.quiet.at).slice(11, 19)} (${b.quiet.strategy}, ${b.quiet.reason}): ` +
        held.map((s) => `${s.broker} ${s.detail || s.reason}`).join("; ")
      : "";
  }

  function dashboard(series, feed, health, initialRankings, balance, pageRows) {
    showBalance(balance);
    setInterval(() => {  // the countdown of the cool-down
      const first = balance.coolDown.next[0];
      if (first) { first.inS = Math.max(0, first.inS - 1); showBalance(balance); }
    }, 1000);
    const refreshBalance = () => fetch("/api/balance/", {credentials: "same-origin"})
      .then((r) => (r.ok ? r.json() : null)).then((b) => { if (b) { balance = b; showBalance(b); } })
      .catch(() => { /* shown again at the next tick */ });
    const chart = document.getElementById("cv-chart");
    Plotly.newPlot(chart, [{x: series.at, y: series.cv, mode: "lines", name: "CV"}],
      {margin: {t: 10, r: 10, b: 40, l: 50}, yaxis: {title: {text: "CV of broker usage"}, rangemode: "tozero"},
       xaxis: {title: {text: "time (UTC)"}}}, {displayModeBar: false, responsive: true});
    // The rankings as last received: a message carries the order and only the rows that
    // changed (all of them when "full"); after a (re)connection the page asks for them whole.
    const rankings = new Map(initialRankings.map((r) => [r.name, r]));
    let order = initialRankings.map((r) => r.name);
    const redraw = () => renderRankings(order.map((name) => rankings.get(name)).filter(Boolean));
    rankingsPager = brokerPager("rankings", pageRows, redraw);
    redraw();
    function showRankings(p) {
      if (p.full) rankings.clear();
      p.changed.forEach((r) => rankings.set(r.name, r));
      order = p.order;
      redraw();
      document.getElementById("cv").textContent = cvText(p.cv, p.serving);
      document.getElementById("mean").textContent = `${Math.round(p.mean * 100)} %`;
    }
    on("balancer.load_reported", showRankings);
    on("socket.open", async () => {
      try {
        const response = await fetch("/api/rankings/", {credentials: "same-origin"});
        if (!response.ok) return;
        const body = await response.json();
        showRankings({full: true, order: body.rankings.map((r) => r.name), changed: body.rankings, cv: body.cv, mean: body.mean, serving: body.serving});
      } catch (err) { /* the next message brings the changes */ }
    });
    on("balancer.cv_sampled", (p) => {
      refreshBalance();
      Plotly.extendTraces(chart, {x: [[p.at]], y: [[p.cv]]}, [0], 720);
      health.lastTick = p.at;
      health.nextTick = new Date(Date.parse(p.at) + health.intervalS * 1000).toISOString();
      health.overdue = false;
      showHealth();
      countdown();
    });
    const list = document.getElementById("decisions");
    renderFeed(list, feed);
    on("balancer.decision_made", (p) => {
      refreshBalance();
      const top = feed[0];
      if (p.quiet && top && top.type === "quiet") {
        top.count += 1; top.last = p.at;
      } else if (p.quiet) {
        feed.unshift({type: "quiet", count: 1, first: p.at, last: p.at, reason: p.reason});
      } else {
        feed.unshift({type: "decision", ...p});
      }
      feed.splice(10);
      renderFeed(list, feed);
    });

    // The loop's health: the next tick counts down; three intervals without one is a warning.
    function showHealth() {
      document.getElementById("last-tick").textContent = health.lastTick ? utc(health.lastTick).slice(11, 19) : "never";
      document.getElementById("loop-overdue").hidden = !health.overdue;
      const state = document.getElementById("loop-state");
      state.textContent = health.sheddingEnabled ? "shedding running" : "shedding paused (placement and drains still run)";
      state.className = health.sheddingEnabled ? "" : "paused";
      const toggle = document.getElementById("loop-toggle");
      if (toggle) toggle.textContent = health.sheddingEnabled ? "Pause shedding…" : "Resume shedding…";
    }
    function countdown() {
      const next = document.getElementById("next-tick");
      if (!health.nextTick) { next.textContent = "—"; return; }
      const wait = Math.round((Date.parse(health.nextTick) - Date.now()) / 1000);
      next.textContent = wait > 0 ? `in ${wait} s` : "due now";
      if (wait < -3 * health.intervalS) { health.overdue = true; document.getElementById("loop-overdue").hidden = false; }
    }
    countdown();
    setInterval(countdown, 1000);
    const toggle = document.getElementById("loop-toggle");
    if (toggle) toggle.addEventListener("click", async () => {
      const pause = health.sheddingEnabled;
      const question = pause
        ? "Pause shedding?\nNo bundle is unloaded for load until you resume; lost brokers, drains and placements still run. Audited."
        : "Resume shedding?\nThe shedder runs again from the next tick. Audited.";
      if (!confirm(question)) return;
      try {
        Object.assign(health, await post(`/api/loop/${pause ? "pause" : "resume"}/`));
        showHealth();
      } catch (err) {
        alert(`Refused: ${err.message}`);
      }
    });
    showHealth();
    connect();
  }

  // A decision's broker usage: before, predicted after, observed at the next tick (percent).
  function decision(d) {
    const names = d.brokers.map((b) => b.name);
    const bar = (key, name, colour) => ({type: "bar", name, x: names, marker: {color: colour},
      y: d.brokers.map((b) => (b[key] === null || b[key] === undefined ? null : b[key] * 100))});
    const traces = [bar("before", "before", "#9db4d8"), bar("after", "predicted after", "#2456a6")];
    if (d.brokers.some((b) => b.observed !== null && b.observed !== undefined)) traces.push(bar("observed", "observed at the next tick", "#f28e2b"));
    const shapes = d.before.avgUsage === null || d.before.avgUsage === undefined ? [] : [{type: "line", xref: "paper", x0: 0, x1: 1,
      y0: d.before.avgUsage * 100, y1: d.before.avgUsage * 100, line: {dash: "dash", color: "#667"}}];
    Plotly.newPlot("usage-chart", traces, {barmode: "group", margin: {t: 10, r: 10, b: 40, l: 60}, shapes,
      yaxis: {title: {text: "usage %"}, rangemode: "tozero"}, legend: {orientation: "h"}}, {displayModeBar: false, responsive: true});
  }

  // A namespace's bundle table: owners change live (its actions are on the bundle map).
  function bundles() {
    on("balancer.bundle_moved", (p) => {
      const row = document.querySelector(`tr[data-bundle="${CSS.escape(p.target)}"]`);
      if (!row) return;
      row.querySelector(".owner").textContent = p.destination || "unassigned";
      row.classList.add("changed");
    });
    connect();
  }

  // The history page: Spark runs with live progress and cancel; the newest report's charts and
  // the newest advisor's ranking, read from the runs' result files through the API.
  function reports(latest, isOperator) {
    const result = document.getElementById("result");
    const KIND_WORDS = {report: "The load report", advisor: "The strategy advisor"};
    document.querySelectorAll("#run-report, #run-advisor").forEach((button) => {
      button.addEventListener("click", async () => {
        const kind = button.dataset.kind;
        if (kind === "advisor" && !confirm("Replay the recorded history under about 20 strategy configs on the reports worker? It takes a few minutes and changes nothing; the shedding loop is not delayed.")) return;
        button.disabled = true;
        try {
          const run = await post("/api/reports/", {kind});
          result.className = "result";
          result.textContent = `${KIND_WORDS[kind]}: run ${run.id} queued. Its progress shows below.`;
          setTimeout(() => location.reload(), 600);
        } catch (err) {
          result.className = "result error";
          result.textContent = `Could not start: ${err.message}`;
          button.disabled = false;
        }
      });
    });
    document.querySelectorAll("button.cancel").forEach((button) => {
      button.addEventListener("click", async () => {
        if (!confirm(`Cancel run ${button.dataset.run}? Spark stops within a few seconds; what it wrote is discarded.`)) return;
        button.disabled = true;
        try {
          await post(`/api/reports/${button.dataset.run}/cancel/`);
          result.className = "result";
          result.textContent = `Run ${button.dataset.run}: cancel requested.`;
        } catch (err) {
          result.className = "result error";
          result.textContent = `Cancel refused: ${err.message}`;
          button.disabled = false;
        }
      });
    });
    on("balancer.report_changed", (p) => {
      const row = document.querySelector(`#runs tr[data-run="${p.id}"]`);
      if (!row) { location.reload(); return; }
      row.querySelector(".status").textContent = p.status;
      row.querySelector(".status").className = `status ${p.status}`;
      const cell = row.querySelector(".progress");
      if (p.status === "running" && p.total) {
        cell.innerHTML = "";
        cell.appendChild(el("progress", {value: p.done, max: p.total}));
        cell.appendChild(el("span", {class: "stage"}, ` ${p.done}/${p.total} ${p.stage}`));
      }
      if (["succeeded", "failed", "cancelled"].includes(p.status)) location.reload();
    });
    connect();
    if (latest.report) reportCharts(latest.report);
    if (latest.advisor) advisorRanking(latest.advisor, isOperator);
  }

  // A result's rows; time series ask for their newest rows and say on the page when older
  // ones were left out.
  const cut = [];
  const results = async (run, name, limit, newest) => {
    const response = await fetch(`/api/reports/${run}/results/${name}/?limit=${limit || 1000}${newest ? "&newest=1" : ""}`, {credentials: "same-origin"});
    if (!response.ok) return [];
    const body = await response.json();
    if (body.truncated) cut.push(`${name.replace(/_/g, " ")}: the newest ${body.rows.length}`);
    return body.rows;
  };
  const CHART = {displayModeBar: false, responsive: true};
  const layoutOf = (y, extra) => ({margin: {t: 10, r: 60, b: 40, l: 70}, xaxis: {type: "date", title: {text: "UTC"}, automargin: true},
    yaxis: {title: {text: y}, rangemode: "tozero", automargin: true}, legend: {orientation: "h"}, ...(extra || {})});

  async function reportCharts(run) {
    const [hours, minutes, hot, moves, namespaces] = await Promise.all([
      results(run, "broker_hours", 5000, true), results(run, "cluster_minutes", 5000, true), results(run, "hot_bundles", 200),
      results(run, "move_effects", 2000, true), results(run, "namespace_hours", 5000, true)]);
    document.getElementById("report-cut").textContent = cut.length
      ? `Long history: the charts show ${cut.join("; ")} rows (the API serves at most 5,000 per request).` : "";
    // CPU p95 per broker and hour as lines (the 20 hottest brokers), the moves as markers.
    const byBroker = {};
    hours.forEach((r) => { (byBroker[r.broker] = byBroker[r.broker] || []).push(r); });
    const hottest = Object.keys(byBroker).sort((a, b) => Math.max(...byBroker[b].map((r) => r.cpu_p95)) - Math.max(...byBroker[a].map((r) => r.cpu_p95))).slice(0, 20).sort();
    const lines = hottest.map((b) => ({x: byBroker[b].map((r) => r.hour), y: byBroker[b].map((r) => r.cpu_p95), name: b, type: "scatter", mode: "lines+markers"}));
    const top = Math.max(10, ...hours.map((r) => r.cpu_p95)) * 1.05;
    const gainOf = (m) => (m.gain === null || m.gain === undefined ? "effect unknown" : `peak ${pct(m.peak_before)} → ${pct(m.peak_after)}`);
    lines.push({x: moves.map((m) => m.at), y: moves.map(() => top), name: "moves", type: "scatter", mode: "markers",
      marker: {symbol: "triangle-down", size: 9, color: moves.map((m) => (m.helped ? "#59a14f" : m.helped === false ? "#e15759" : "#888"))},
      hovertext: moves.map((m) => `${m.bundle}: ${m.source} → ${m.destination}; ${gainOf(m)}`), hoverinfo: "text+x"});
    Plotly.newPlot("load-chart", lines, layoutOf("CPU p95 %"), CHART);
    Plotly.newPlot("cv-chart", [
      {x: minutes.map((r) => r.minute), y: minutes.map((r) => r.cv), name: "CV", type: "scatter", mode: "lines"},
      {x: minutes.map((r) => r.minute), y: minutes.map((r) => r.max_over_mean), name: "max/mean", type: "scatter", mode: "lines", yaxis: "y2"}],
      layoutOf("CV", {yaxis2: {title: {text: "max/mean"}, overlaying: "y", side: "right", rangemode: "tozero", automargin: true}}), CHART);
    // Hot bundles: the 20 hottest as bars, every listed one in the table.
    const bars = hot.slice(0, 20).reverse();
    document.getElementById("hot-chart").style.height = `${120 + 22 * bars.length}px`;  // a bar per bundle
    Plotly.newPlot("hot-chart", [{type: "bar", orientation: "h", y: bars.map((b) => b.bundle), x: bars.map((b) => b.throughput_p95),
      marker: {color: bars.map((b) => (b.split_candidate ? "#e15759" : "#4e79a7"))},
      hovertext: bars.map((b) => `${fmtBytes(b.throughput_p95)} p95, ${Math.round(b.msg_rate_p95)} msg/s p95; moved ${b.moves}×`), hoverinfo: "text"}],
      {margin: {t: 10, r: 10, b: 40, l: 260}, xaxis: {title: {text: "throughput p95 (bytes/s)"}}, height: 120 + 22 * bars.length}, CHART);
    const hotBody = document.querySelector("#hot-bundles tbody");
    hotBody.innerHTML = "";
    hot.forEach((b) => {
      const tr = el("tr");
      [b.throughput_rank, b.bundle, b.owner || "—", fmtBytes(b.throughput_p95), `${Math.round(b.msg_rate_p95)} msg/s`, b.topics, b.moves, b.splits,
       b.split_candidate ? `yes: ${b.split_reasons}` : "no"].forEach((v) => tr.appendChild(el("td", {}, String(v))));
      hotBody.appendChild(tr);
    });
    if (!hot.length) hotBody.appendChild(el("tr")).appendChild(el("td", {colspan: 9, class: "muted"}, "No bundle samples in the history yet."));
    // Moves and their effect.
    const known = moves.filter((m) => m.gain !== null && m.gain !== undefined);
    const helped = known.filter((m) => m.helped).length;
    const gains = known.map((m) => m.gain).sort((a, b) => a - b);
    document.getElementById("move-summary").textContent = moves.length
      ? `${moves.length} move(s); ${helped} of ${known.length} with reports on both sides lowered the higher usage of their two brokers` +
        (gains.length ? ` (median gain ${pct(gains[Math.floor(gains.length / 2)])}).` : ".")
      : "No moves in the history yet.";
    const moveBody = document.querySelector("#move-effects tbody");
    moveBody.innerHTML = "";
    moves.slice(-200).reverse().forEach((m) => {
      const tr = el("tr", {class: m.helped ? "" : m.helped === false ? "vetoed" : ""});
      [utc(m.at).slice(0, 19), m.bundle, `${m.source} → ${m.destination}`,
       m.peak_before === null ? "—" : pct(m.peak_before), m.peak_after === null ? "—" : pct(m.peak_after),
       m.gain === null || m.gain === undefined ? "—" : pct(m.gain), m.helped === null || m.helped === undefined ? "unknown" : m.helped ? "yes" : "no"]
        .forEach((v) => tr.appendChild(el("td", {}, String(v))));
      moveBody.appendChild(tr);
    });
    // Namespaces: mean throughput per hour, stacked.
    const byNamespace = {};
    namespaces.forEach((r) => { (byNamespace[r.namespace] = byNamespace[r.namespace] || []).push(r); });
    Plotly.newPlot("namespace-chart", Object.keys(byNamespace).sort().map((n) => ({x: byNamespace[n].map((r) => r.hour),
      y: byNamespace[n].map((r) => r.throughput_mean), name: n, type: "scatter", mode: "lines+markers", stackgroup: "one"})),
      layoutOf("throughput (bytes/s)"), CHART);
  }

  async function advisorRanking(run, isOperator) {
    const rows = await results(run, "ranking", 200);
    const scored = rows.filter((r) => r.maxOverMeanMedian !== null);
    const front = scored.filter((r) => r.pareto).sort((a, b) => a.movesPerHour - b.movesPerHour);
    const current = rows.find((r) => r.id === 0);
    document.getElementById("advisor-summary").textContent = rows.length
      ? `${rows.length} configs replayed over ${current ? current.hours.toFixed(1) : "?"} h of recorded load` +
        (current && current.maxOverMeanMedian !== null ? `; the current config: max/mean ${current.maxOverMeanMedian.toFixed(3)} at ${current.movesPerHour.toFixed(1)} moves/h.` : ".") +
        " Lower is better on both axes; the line joins the configs no other beats on both (the Pareto front)."
      : "The advisor wrote no ranking.";
    Plotly.newPlot("pareto-chart", [
      {x: scored.map((r) => r.movesPerHour), y: scored.map((r) => r.maxOverMeanMedian), text: scored.map((r) => `#${r.rank} ${r.label}`),
       type: "scatter", mode: "markers", name: "configs", hoverinfo: "text+x+y",
       marker: {size: 10, color: scored.map((r) => (r.id === 0 ? "#f28e2b" : r.pareto ? "#59a14f" : "#9aa3b5"))}},
      {x: front.map((r) => r.movesPerHour), y: front.map((r) => r.maxOverMeanMedian), type: "scatter", mode: "lines", name: "Pareto front",
       line: {color: "#59a14f", dash: "dot"}, hoverinfo: "skip"}],
      {margin: {t: 10, r: 10, b: 50, l: 70}, xaxis: {title: {text: "moves per hour"}}, yaxis: {title: {text: "max/mean of broker usage (median)"}},
       legend: {orientation: "h"}}, CHART);
    const body = document.querySelector("#ranking tbody");
    body.innerHTML = "";
    const num = (v, digits) => (v === null || v === undefined ? "—" : v.toFixed(digits));
    rows.forEach((r) => {
      const tr = el("tr", {"data-candidate": r.id, class: r.id === 0 ? "current" : ""});
      [r.rank, r.label + (r.error ? ` (failed: ${r.error})` : ""), num(r.maxOverMeanMedian, 3), num(r.maxOverMeanP95, 3), num(r.cvMedian, 3),
       num(r.movesPerHour, 1), r.oscillations, r.pareto ? "yes" : ""].forEach((v) => tr.appendChild(el("td", {}, String(v))));
      const act = el("td");
      if (isOperator && r.id !== 0 && r.maxOverMeanMedian !== null) {
        act.appendChild(el("a", {href: `/config/?advisor=${run}&candidate=${r.id}`, class: "adopt"}, "Adopt… (in the config editor)"));
      }
      tr.appendChild(act);
      body.appendChild(tr);
    });
  }

  // A stable colour per broker: its position among the brokers by name. Okabe & Ito's
  // colour-blind-safe palette (and Tol's wine for an eighth): told apart with deuteranopia too
  // (tests/console/test_map_colours.py); beyond eight, hues by the golden angle.
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
                   "#882255"];
  const colourOf = (index) => index < PALETTE.length ? PALETTE[index]
    : `hsl(${Math.round((index * 137.508) % 360)}, 55%, 50%)`;
  const hex = (n) => `0x${n.toString(16).padStart(8, "0")}`;
  const utc = (iso) => iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : "never";
  // A CV in words: below two serving brokers there is no spread to measure (one broker's CV
  // is 0 however loaded it is), said instead of a reassuring 0.000.
  const cvText = (cv, serving, digits = 3) => (serving !== undefined && serving < 2)
    ? `— (${serving} serving broker${serving === 1 ? "" : "s"})` : cv.toFixed(digits);
  // What an override passes, as the preview listed it (nothing else is overridden).
  const overrideSaid = (overrides) => (overrides && overrides.length)
    ? `: ${overrides.join(" and ")}, as the preview shows` : "";
  // A drain's progress in words (selectors.drain_progress): what is left before "drained".
  const drainSaid = (d) => {
    if (!d) return "";
    const since = d.since ? ` since ${d.since.slice(11, 19)} UTC` : "";
    const failed = d.failed ? `, ${d.failed} failed` : "";
    if (d.state === "drained") {
      if (!(d.bundles || d.queued || d.inFlight)) return `drained${since}: no bundle, nothing in flight${failed}`;
      return `drained${since}, yet ${d.bundles} bundle${d.bundles === 1 ? "" : "s"} on it, ${d.queued} queued, ${d.inFlight} in flight${failed}`;
    }
    return `draining${since}: ${d.bundles} bundle${d.bundles === 1 ? "" : "s"} left, ${d.queued} queued, ` +
      `${d.inFlight} in flight${failed}`;
  };
  const pct = (f) => `${(f * 100).toFixed(1)} %`;
  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => { if (v !== undefined && v !== null) node.setAttribute(k, v); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Refresh a page's data from the API after a live event: at once after a move, at most every
  // ``minGapMs`` for load reports.
  function liveRefresh(url, apply, minGapMs) {
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

  // The plan of an operator's action, as the balancer made it: summary, each action with its
  // explanation, vetoes marked, and the predicted CV.
  function renderPlan(body, parts) {
    parts.summary.textContent = body.summary;
    parts.actions.innerHTML = "";
    const actions = body.plan.actions;
    actions.forEach((a, i) => {
      const next = actions[i + 1], prev = actions[i - 1];
      if (a.kind === "place" && prev && prev.kind === "unload" && prev.bundle === a.bundle) return;
      // An unload and the placement of its bundle are one move: one line.
      const move = a.kind === "unload" && next && next.kind === "place" && next.bundle === a.bundle ? next : null;
      const what = a.kind === "brokerState" ? `${a.broker}: ${a.from} → ${a.to}`
        : a.kind === "split" ? `split ${a.bundle}${a.boundaries.length ? " at " + a.boundaries.join(", ") : ""}`
        : move ? `move ${a.bundle}: ${a.source} → ${move.destination || "nobody"}`
        : `${a.kind} ${a.bundle}: ${a.source || "nobody"} → ${a.destination || (a.outcome === "vetoed" ? "(stays)" : "(placed by the next cycle)")}`;
      const vetoed = a.outcome === "vetoed" || (move && move.outcome === "vetoed");
      const li = el("li", {class: vetoed ? "vetoed" : "planned"});
      li.appendChild(el("b", {}, what));
      const said = (x) => `${x.outcome}${x.veto ? ` (${x.veto})` : ""}${x.forced ? ", forced" : ""}: ${x.explanation}`;
      li.appendChild(el("span", {}, ` — ${said(a)}${move ? `; placement ${said(move)}` : ""}`));
      parts.actions.appendChild(li);
    });
    const b = body.plan.stats.before, f = body.plan.stats.after;
    parts.stats.textContent = `over the serving brokers (${b.serving} now, ${f.serving} after): CV ${cvText(b.cv, b.serving)} → ` +
      `${cvText(f.cv, f.serving)} predicted; max/mean ${b.maxOverMean.toFixed(2)} → ${f.maxOverMean.toFixed(2)}; mean usage ${pct(b.avgUsage)}.`;
  }

  function bundleMap(initial, isOperator) {
    const chart = document.getElementById("bundle-map");
    const viewSelect = document.getElementById("map-view");
    const result = document.getElementById("result");
    let data = initial, selected = null;   // selected: bundle name

    // Every bundle as an object, built once per data and found by name.
    let cache = null;
    const flat = () => {
      if (cache && cache.data === data) return cache.list;
      const list = [];
      data.namespaces.forEach((ns) => ns.bundles.forEach((b) => list.push({
        namespace: ns.name, lower: b[0], upper: b[1], owner: b[2], throughput: b[3], msgRate: b[4],
        topics: b[5], moved: b[6], eligibleAt: b[7], figures: b[8], name: `${ns.name}/${hex(b[0])}_${hex(b[1])}`})));
      cache = {data, list, byName: new Map(list.map((b) => [b.name, b]))};
      return list;
    };
    const named = (name) => { flat(); return cache.byName.get(name) || null; };
    // A bundle on its way on Pulsar (queued, sent, being verified): still on its owner till seen.
    const movingOf = (b) => {
      const m = (data.moving || {})[b.name];
      if (!m) return "";
      const state = m.state === "queued" ? "queued" : m.state === "sending" ? "being sent" : "sent, awaiting Pulsar";
      return `${state}: ${m.source} → ${m.destination || "where Pulsar places it"}`;
    };

    // A bundle's throughput in words, saying where the figure comes from.
    const figuresOf = (b) => b.figures === "reported" ? fmtBytes(b.throughput)
      : b.figures === "estimated" ? `${fmtBytes(b.throughput)} (estimated: its share of the bundle it was cut from)`
      : "not reported by its owner yet";
    // The cool-down: a bundle moved recently may move again at eligibleAt (ISO, UTC; null: now).
    const cooling = (eligibleAt) => Boolean(eligibleAt) && Date.parse(eligibleAt) > Date.now();
    const coolDownOf = (b) => {
      if (!cooling(b.eligibleAt)) return "no";
      const s = Math.ceil((Date.parse(b.eligibleAt) - Date.now()) / 1000);
      const left = s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
      return `eligible in ${left} (at ${utc(b.eligibleAt).slice(11)})`;
    };

    // The range view is one raster image under Plotly's axes: every bundle a rectangle drawn on
    // a canvas (owner's colour, alpha by load, hatched in cool-down), not an SVG element per
    // bundle, so 12,800 bundles draw in milliseconds. Zooming re-draws the visible range.
    // The pointer is hit-tested against the bundles (``bundleAt``).
    // Throughput on a sequential scale (viridis: ordered and colour-blind safe), 0–1.
    const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
                     "#6ece58", "#b5de2b", "#fde725"];
    const sequential = (x) => VIRIDIS[Math.min(VIRIDIS.length - 1, Math.max(0, Math.round(x * (VIRIDIS.length - 1))))];
    const colourBy = document.getElementById("map-colour");
    const HALF = 0.38;  // half a row's height, in rows
    const ROW_PX = 26;
    const MARGIN = {t: 10, r: 10, b: 40, l: 160};
    let hatch = null;
    const chartHeight = (rows) => Math.max(320, 60 + ROW_PX * rows);

    // {source (PNG data URL), drawn (bundles on it)} for the hash range [x0, x1].
    function rangeImage(x0, x1) {
      const ratio = window.devicePixelRatio || 1;
      const width = Math.max(100, Math.round((chart.clientWidth - MARGIN.l - MARGIN.r) * ratio));
      // Rows as tall as Plotly draws them, so that the image is never stretched.
      const plotHeight = chartHeight(data.namespaces.length) - MARGIN.t - MARGIN.b;
      const rowPx = Math.max(1, Math.floor((plotHeight / Math.max(1, data.namespaces.length)) * ratio));
      const canvas = document.createElement("canvas");
      canvas.width = width;
      canvas.height = Math.max(1, data.namespaces.length * rowPx);
      const ctx = canvas.getContext("2d");
      if (!hatch) {
        const tile = document.createElement("canvas");
        tile.width = tile.height = 8;
        const t = tile.getContext("2d");
        t.strokeStyle = "rgba(29, 35, 48, 0.75)"; t.lineWidth = 1.5;
        t.beginPath(); t.moveTo(0, 8); t.lineTo(8, 0); t.stroke();
        hatch = ctx.createPattern(tile, "repeat");
      }
      const brokers = new Map(data.brokers.map((b, i) => [b.name, colourOf(i)]));
      let maxLoad = 1;
      data.namespaces.forEach((ns) => ns.bundles.forEach((b) => { if (b[3] > maxLoad) maxLoad = b[3]; }));
      const scale = width / (x1 - x0), pad = Math.round((0.5 - HALF) * rowPx);
      let drawn = 0;
      data.namespaces.forEach((ns, r) => ns.bundles.forEach((b) => {
        if (b[1] <= x0 || b[0] >= x1) return;
        const a = Math.max(0, (b[0] - x0) * scale), c = Math.min(width, (b[1] - x0) * scale);
        const w = Math.max(1, c - a - ratio);  // a pixel's gap between neighbours
        const share = Math.sqrt(b[3] / maxLoad);  // 0–1, square root: small loads visible
        const top = r * rowPx + pad, height = rowPx - 2 * pad;
        ctx.globalAlpha = 1;
        if (colourBy.value === "throughput") {
          ctx.fillStyle = b[2] === null && !b[3] ? "#c8ccd4" : sequential(share);
          ctx.fillRect(a, top, w, height);
        } else {
          // The owner's colour as the legend shows it; throughput as the height of a dark bar.
          ctx.fillStyle = b[2] === null ? "#c8ccd4" : brokers.get(b[2]) || "#888";
          ctx.fillRect(a, top, w, height);
          const bar = Math.round(height * 0.45 * share);
          if (bar > 0) { ctx.fillStyle = "rgba(29, 35, 48, 0.6)"; ctx.fillRect(a, top + height - bar, w, bar); }
        }
        if (cooling(b[7])) { ctx.globalAlpha = 1; ctx.fillStyle = hatch; ctx.fillRect(a, r * rowPx + pad, w, rowPx - 2 * pad); }
        drawn += 1;
      }));
      // The raster and its geometry stay on the element, for tools and the browser tests.
      chart.fulcrumMap = {canvas, x0, x1, scale, rowPx};
      return {source: canvas.toDataURL("image/png"), drawn};
    }

    // The selected bundle, outlined.
    function selectedShape() {
      const chosen = selected && named(selected);
      const y = chosen ? data.namespaces.findIndex((ns) => ns.name === chosen.namespace) : -1;
      if (y < 0) return [];
      return [{type: "rect", xref: "x", yref: "y", x0: chosen.lower, x1: chosen.upper, y0: y - HALF, y1: y + HALF,
        line: {color: "#1d2330", width: 2.5}}];
    }

    // The bundle under the pointer (range view): the plot area's pixels to (hash, row), then a
    // binary search of that namespace's bundles by lower bound.
    function bundleAt(event) {
      const area = chart.querySelector(".nsewdrag");
      if (!area || viewSelect.value !== "ranges") return null;
      const box = area.getBoundingClientRect();
      const fx = (event.clientX - box.left) / box.width, fy = (event.clientY - box.top) / box.height;
      if (fx < 0 || fx > 1 || fy < 0 || fy > 1) return null;
      const [x0, x1] = chart.layout.xaxis.range, [y0, y1] = chart.layout.yaxis.range;
      const hash = x0 + fx * (x1 - x0), row = y1 + fy * (y0 - y1);  // range[1] is the top
      const ns = data.namespaces[Math.round(row)];
      if (!ns || Math.abs(row - Math.round(row)) > HALF) return null;
      let lo = 0, hi = ns.bundles.length - 1;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (ns.bundles[mid][0] <= hash) lo = mid; else hi = mid - 1; }
      const b = ns.bundles[lo];
      return b && b[0] <= hash && hash < b[1] ? named(`${ns.name}/${hex(b[0])}_${hex(b[1])}`) : null;
    }

    const tip = document.getElementById("map-tip");
    function showTip(event) {
      const b = bundleAt(event);
      if (!b) { tip.hidden = true; chart.style.cursor = ""; return; }
      chart.style.cursor = "pointer";
      tip.innerHTML = "";
      tip.appendChild(el("b", {}, b.name));
      [["owner", b.owner || "unassigned"], ...(movingOf(b) ? [["moving", movingOf(b)]] : []), ["throughput", figuresOf(b)],
       ["msg rate", b.figures === "none" ? "—" : `${Math.round(b.msgRate)} msg/s`], ["topics", b.topics],
       ["last move", utc(b.moved)], ["cool-down", coolDownOf(b)]]
        .forEach(([k, v]) => tip.appendChild(el("div", {}, `${k} ${v}`)));
      const host = chart.getBoundingClientRect();
      tip.style.left = `${Math.min(event.clientX - host.left + 14, host.width - 260)}px`;
      tip.style.top = `${event.clientY - host.top + 14}px`;
      tip.hidden = false;
    }

    let treemapFocus = null;  // the broker whose every bundle the treemap shows
    function treemapTrace(bundles) {
      const labels = [], parents = [], values = [], ids = [], colours = [], text = [];
      const brokers = data.brokers.map((b) => b.name);
      const owned = bundles.filter((b) => b.owner);
      brokers.forEach((name, i) => {
        const mine = owned.filter((b) => b.owner === name);
        ids.push(name); labels.push(`${name} (${mine.length})`); parents.push("");
        values.push(mine.reduce((s, b) => s + Math.max(b.throughput, 1), 0));
        colours.push(colourOf(i)); text.push(fmtBytes(mine.reduce((s, b) => s + b.throughput, 0)));
      });
      // Each broker's 60 busiest bundles, the rest as one tile (a treemap stays legible and
      // fast); a click on that tile shows every bundle of that broker (up to 5,000).
      document.getElementById("treemap-all").hidden = !treemapFocus;
      brokers.forEach((name, i) => {
        const mine = owned.filter((b) => b.owner === name).sort((a, b) => b.throughput - a.throughput);
        const shown = name === treemapFocus ? 5000 : 60;
        mine.slice(0, shown).forEach((b) => {
          ids.push(b.name); labels.push(`${b.namespace} ${hex(b.lower)}`); parents.push(name);
          values.push(Math.max(b.throughput, 1)); colours.push(colourOf(i)); text.push(fmtBytes(b.throughput));
        });
        const rest = mine.slice(shown);
        if (rest.length) {
          ids.push(`${name}/other`); labels.push(`${rest.length} other bundles (click to show them)`); parents.push(name);
          values.push(rest.reduce((s, b) => s + Math.max(b.throughput, 1), 0)); colours.push(colourOf(i));
          text.push(fmtBytes(rest.reduce((s, b) => s + b.throughput, 0)));
        }
      });
      return [{type: "treemap", ids, labels, parents, values, text, branchvalues: "total",
        marker: {colors: colours}, textinfo: "label+text",
        hovertemplate: "<b>%{id}</b><br>%{text}<extra></extra>"}];
    }

    function draw() {
      const bundles = flat();
      const treemap = viewSelect.value === "treemap";
      const rows = data.namespaces.length;
      chart.style.height = treemap ? "640px" : `${chartHeight(rows)}px`;
      const zoomed = !treemap && chart.layout && chart.layout.yaxis && chart.layout.yaxis.tickvals
        && chart.layout.xaxis && chart.layout.xaxis.range;
      const xrange = zoomed ? chart.layout.xaxis.range.slice() : [0, 0xffffffff];  // keep the zoom
      const whole = xrange[0] <= 0 && xrange[1] >= 0xffffffff;
      const ticks = whole ? [0, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff]
        : [0, 1, 2, 3, 4].map((i) => Math.round(xrange[0] + (i * (xrange[1] - xrange[0])) / 4));
      drawLegend(bundles);
      if (treemap) {
        // The height said to Plotly too: "responsive" follows the window, not the box.
        Plotly.react(chart, treemapTrace(bundles), {margin: {t: 10, r: 10, b: 10, l: 10}, height: 640},
          {displayModeBar: false, responsive: true});
        chart.dataset.drawn = "0";
      } else {
        const image = rangeImage(xrange[0], xrange[1]);
        const layout = {
          margin: MARGIN, showlegend: false, hovermode: false, dragmode: "zoom", height: chartHeight(rows),
          xaxis: {range: xrange, tickvals: ticks, ticktext: ticks.map(hex), zeroline: false, showgrid: false,
            title: {text: "hash range (drag to zoom, double-click to reset)"}},
          yaxis: {range: [rows - 0.5, -0.5], tickvals: data.namespaces.map((_, i) => i),
            ticktext: data.namespaces.map((ns) => ns.name), fixedrange: true, zeroline: false, showgrid: false},
          images: [{source: image.source, xref: "x", yref: "y", x: xrange[0], y: -0.5, sizex: xrange[1] - xrange[0],
            sizey: rows, sizing: "stretch", xanchor: "left", yanchor: "top", layer: "above"}],
          shapes: selectedShape(),
        };
        // One invisible point per corner gives Plotly its axes; the bundles are the image.
        Plotly.react(chart, [{type: "scatter", mode: "markers", x: [0, 0xffffffff], y: [0, Math.max(0, rows - 1)],
          marker: {opacity: 0}, hoverinfo: "skip", showlegend: false}], layout, {displayModeBar: false, responsive: true});
        chart.dataset.drawn = String(image.drawn);
      }
      document.getElementById("map-stats").textContent =
        `${bundles.length} bundles in ${data.namespaces.length} namespaces on ${data.brokers.length} brokers; as of ${utc(data.at)}.`;
      chart.dataset.bundles = String(bundles.length);
      if (selected) showPanel(named(selected));
    }

    // Every broker with its colour, state and bundle count (brokers without bundles too).
    function drawLegend(bundles) {
      const legend = document.getElementById("map-legend");
      const wasOpen = Boolean(document.getElementById("legend-brokers")?.open);
      legend.innerHTML = "";
      const counts = {};
      bundles.forEach((b) => { counts[b.owner || ""] = (counts[b.owner || ""] || 0) + 1; });
      // Past 16 brokers the colours repeat and a legend of every broker is a wall: folded,
      // a bundle's owner is in its tooltip and its panel.
      const many = data.brokers.length > 16;
      const chips = many ? el("details", {class: "legend-brokers", id: "legend-brokers"}) : legend;
      if (many) {
        chips.open = wasOpen;
        chips.appendChild(el("summary", {}, `${data.brokers.length} brokers: too many to tell by colour alone, so a bundle's owner is in its tooltip and panel — show every broker's colour`));
        legend.appendChild(chips);
      }
      data.brokers.forEach((b, i) => {
        const item = el("span", {class: `chip state-${b.state}`, "data-broker": b.name,
          title: `${b.name}: ${b.state}, failure domain ${b.domain || "default"}`});
        const swatch = el("i");
        swatch.style.background = colourOf(i);
        item.appendChild(swatch);
        item.appendChild(document.createTextNode(`${b.name} (${counts[b.name] || 0})${b.state === "active" ? "" : " " + b.state}`));
        chips.appendChild(item);
      });
      if (counts[""]) {
        const item = el("span", {class: "chip"});
        const swatch = el("i"); swatch.style.background = "#c8ccd4";
        item.appendChild(swatch); item.appendChild(document.createTextNode(`unassigned (${counts[""]})`));
        legend.appendChild(item);
      }
      // Throughput's own key: a bar's height by owner, or the sequential scale.
      const busiest = bundles.reduce((m, b) => Math.max(m, b.throughput || 0), 0);
      const key = el("span", {class: "chip throughput-key", id: "throughput-key"});
      if (colourBy.value === "throughput") {
        const ramp = el("i", {class: "ramp"});
        ramp.style.background = `linear-gradient(to right, ${VIRIDIS.join(", ")})`;
        key.appendChild(document.createTextNode("throughput 0 "));
        key.appendChild(ramp);
        key.appendChild(document.createTextNode(` ${fmtBytes(busiest)} (square root)`));
        legend.querySelectorAll("span.chip[data-broker] i").forEach((i) => { i.style.visibility = "hidden"; });
      } else {
        key.appendChild(document.createTextNode(`dark bar: throughput, full at ${fmtBytes(busiest)} (square root)`));
      }
      legend.appendChild(key);
    }

    const panel = document.getElementById("panel");
    function showPanel(bundle) {
      const body = document.getElementById("panel-body");
      if (!bundle) {
        body.hidden = true; document.getElementById("panel-empty").hidden = false;
        panel.classList.remove("open"); selected = null;
        return;
      }
      const changed = selected !== bundle.name;
      selected = bundle.name;
      body.hidden = false; document.getElementById("panel-empty").hidden = true;
      panel.classList.add("open");
      panel.dataset.bundle = bundle.name;
      panel.dataset.owner = bundle.owner || "";
      document.getElementById("panel-title").textContent = bundle.name;
      const facts = document.getElementById("panel-facts");
      facts.innerHTML = "";
      [["Owner", bundle.owner || "unassigned"], ...(movingOf(bundle) ? [["Moving", movingOf(bundle)]] : []),
       ["Hash range", `${hex(bundle.lower)} – ${hex(bundle.upper)}`],
       ["Throughput (short-term)", figuresOf(bundle)], ["Msg rate", bundle.figures === "none" ? "—" : `${Math.round(bundle.msgRate)} msg/s`],
       ["Topics", bundle.topics], ["Last move", utc(bundle.moved)],
       ["Cool-down", cooling(bundle.eligibleAt) ? `${coolDownOf(bundle)}: the balancer leaves it alone until then; an unload needs an override` : "no"]]
        .forEach(([k, v]) => { facts.appendChild(el("dt", {}, k)); facts.appendChild(el("dd", {}, v)); });
      const moved = panel.dataset.shownOwner !== (bundle.owner || "");
      panel.dataset.shownOwner = bundle.owner || "";
      if (isOperator && (changed || moved)) { hidePlan(); loadDestinations(); loadUndo(); }
    }

    function wireClicks() {
      chart.removeAllListeners && chart.removeAllListeners("plotly_relayout");
      chart.on("plotly_relayout", (ev) => {  // a zoom: the image again, for the visible range
        if (ev["xaxis.autorange"]) chart.layout.xaxis.range = [0, 0xffffffff];
        else if (!("xaxis.range[0]" in ev) && !("xaxis.range" in ev)) return;
        const [x0, x1] = chart.layout.xaxis.range;
        chart.layout.xaxis.range = [Math.max(0, x0), Math.min(0xffffffff, x1)];
        draw();
      });
      chart.removeAllListeners && chart.removeAllListeners("plotly_click");
      chart.removeAllListeners && chart.removeAllListeners("plotly_treemapclick");
      // A tile's click (Plotly zooms into it unless this answers false): a bundle opens its
      // panel, a broker's "other" tile shows all its bundles; never a drill-down, so the
      // overview stays.
      chart.on("plotly_treemapclick", (ev) => {
        const point = ev.points[0];
        if (point && String(point.id).endsWith("/other")) {  // every bundle of that broker
          treemapFocus = String(point.id).slice(0, -"/other".length);
          draw();
          return false;
        }
        const bundle = point && named(point.id);
        if (bundle) showPanel(bundle);
        return false;
      });
    }
    chart.addEventListener("mousemove", showTip);
    chart.addEventListener("mouseleave", () => { tip.hidden = true; });
    // A click selects after a moment, so that a double-click (Plotly's zoom reset) selects none.
    let clickTimer = null;
    chart.addEventListener("dblclick", () => { clearTimeout(clickTimer); clickTimer = null; });
    chart.addEventListener("click", (event) => {
      const bundle = bundleAt(event);
      if (event.detail > 1) { clearTimeout(clickTimer); clickTimer = null; return; }
      clearTimeout(clickTimer);
      if (bundle) clickTimer = setTimeout(() => { clickTimer = null; showPanel(bundle); Plotly.relayout(chart, {shapes: selectedShape()}); }, 250);
    });
    document.getElementById("panel-close").addEventListener("click", () => showPanel(null));
    viewSelect.addEventListener("change", () => {
      if (viewSelect.value !== "treemap") document.getElementById("treemap-all").hidden = true;
      draw(); wireClicks();
    });
    document.getElementById("treemap-all").addEventListener("click", () => { treemapFocus = null; draw(); });
    colourBy.addEventListener("change", () => draw());

    // Operators: preview, then confirm.
    let pending = null;  // {url, body, label}
    const plan = document.getElementById("plan");
    const planParts = () => ({summary: document.getElementById("plan-summary"),
      actions: document.getElementById("plan-actions"), stats: document.getElementById("plan-stats")});
    function hidePlan() { if (plan) plan.hidden = true; pending = null; }

    async function loadDestinations() {
      const select = document.getElementById("unload-destination");
      select.length = 1;
      if (!panel.dataset.owner) return;
      try {
        const body = await post(`/api/bundles/by-name/unload/`, {bundle: selected, preview: true});
        // Only the split algorithms this bundle's data allows (the others say why).
        const algorithms = document.getElementById("split-algorithm");
        (body.splits || []).forEach((c) => {
          const option = algorithms.querySelector(`option[value="${c.name}"]`);
          if (!option) return;
          option.disabled = !c.allowed;
          option.textContent = option.textContent.replace(/ \(not for this bundle: .*\)$/, "") +
            (c.allowed ? "" : ` (not for this bundle: ${c.why})`);
          if (!c.allowed && algorithms.value === c.name) algorithms.value = "range_equally_divide";
        });
        body.destinations.forEach((d) => {
          // Pulsar takes a destination to any active broker: one a placement filter would not
          // choose stays a choice, with the filter's refusal as a warning (a veto to override).
          const option = el("option", {value: d.broker, title: d.why || d.warning || ""},
            !d.eligible ? `${d.broker} — ${d.why}` : d.warning ? `${d.broker} — ⚠ ${d.warning}` : d.broker);
          option.disabled = !d.eligible;
          select.appendChild(option);
        });
      } catch (err) { /* the preview button says why */ }
    }

    // Undo: the bundle's latest audited unload, back to the broker it left (the audit's undo),
    // offered when the server's preview accepts it; otherwise its refusal is shown.
    let undoAsked = 0;  // the latest offer asked for: an older answer arriving later is dropped
    async function loadUndo() {
      const form = document.getElementById("undo-form"), said = document.getElementById("undo-last");
      const button = document.getElementById("undo-preview");
      const name = selected, asked = ++undoAsked;
      form.hidden = true;
      const shown = named(name);
      if (!shown || !shown.moved) return;  // never moved: nothing to undo, nothing to ask
      try {
        const answer = await post(`/api/bundles/by-name/undo/`, {bundle: name, preview: true});
        if (asked !== undoAsked || answer.undoable === false) return;
        const was = answer.undoes;
        said.textContent = `Its last move (audit row #${answer.reverses}, ${utc(was.at)}) took it from ` +
          `${was.source} to ${was.destination}; undoing it sends it back to ${was.source}` +
          `${answer.vetoed ? " (vetoed: the preview says why)" : ""}.`;
        button.disabled = false;
        form.hidden = false;
      } catch (err) {
        if (asked !== undoAsked) return;
        said.textContent = `Cannot undo its last move: ${err.message}`;
        button.disabled = true;
        form.hidden = false;
      }
    }

    async function preview(kind) {
      const name = selected, owner = panel.dataset.owner;
      const body = {bundle: name, preview: true};
      if (owner && kind !== "undo") body.expected_owner = owner;
      let label;
      if (kind === "undo") {
        body.reason = document.getElementById("undo-reason").value;
        label = `Undo the last move of ${name}`;
      } else if (kind === "unload") {
        const destination = document.getElementById("unload-destination").value;
        if (destination) body.destination = destination;
        body.reason = document.getElementById("unload-reason").value;
        label = `Unload ${name}`;
      } else {
        body.algorithm = document.getElementById("split-algorithm").value;
        const positions = document.getElementById("split-positions").value.split(/[\s,]+/).filter(Boolean);
        if (body.algorithm === "specified_positions_divide") body.positions = positions;
        body.reason = document.getElementById("split-reason").value;
        label = `Split ${name}`;
      }
      result.className = "result";
      result.textContent = "";
      try {
        const answer = await post(`/api/bundles/by-name/${kind}/`, body);
        if (name !== selected) return;  // another bundle was chosen meanwhile: not its plan
        plan.hidden = false;
        plan.dataset.kind = kind;
        document.getElementById("plan-title").textContent = `Preview: ${label.toLowerCase()}`;
        renderPlan(answer, planParts());
        const children = document.getElementById("plan-children");
        children.innerHTML = "";
        if (kind === "split" && answer.children.length) {
          const table = el("table", {class: "children"});
          const measured = answer.children.every((c) => c.measured);
          table.innerHTML = `<thead><tr><th>Child</th><th>${measured ? "Share of throughput" : "Share of range"}</th><th>Throughput</th><th>Msg rate</th><th>Topics</th></tr></thead>`;
          const tbody = el("tbody");
          answer.children.forEach((c) => {
            const tr = el("tr");
            [c.bundle.split("/").pop(), pct(c.fraction), fmtBytes(c.throughput), `${Math.round(c.msgRate)} msg/s`, c.topics]
              .forEach((v) => tr.appendChild(el("td", {}, v)));
            tbody.appendChild(tr);
          });
          table.appendChild(tbody);
          children.appendChild(table);
          children.appendChild(el("p", {class: "muted"}, (measured
            ? "Each child's load is the sum of its own topics' rates, from the owner's per-topic stats."
            : "Each child's load is its share of the hash range (the owner's reports carry this bundle's totals, not per-topic rates).")
            + " The children are unowned until the next lookup or tick places them."));
        }
        const override = document.getElementById("plan-override");
        override.hidden = !answer.overridable;
        document.getElementById("plan-force-what").textContent = overrideSaid(answer.overrides);
        document.getElementById("plan-force").checked = false;
        const confirmButton = document.getElementById("plan-confirm");
        confirmButton.disabled = answer.vetoed && !answer.overridable;
        confirmButton.textContent = !answer.vetoed ? "Confirm" : answer.overridable ? "Confirm with override" : "Refused";
        if (answer.vetoed && answer.overridable) confirmButton.disabled = true;
        delete body.preview;
        // An undo is confirmed for the very move previewed (its audit row): refused as undone
        // already if another operator, or another tab, undid it first.
        const url = kind === "undo" ? `/api/audit/${answer.reverses}/undo/` : `/api/bundles/by-name/${kind}/`;
        pending = {url, body, label, vetoed: answer.vetoed, overrides: answer.overrides || []};
        // The preview and its Confirm in view, whatever the panel's length.
        confirmButton.scrollIntoView({block: "nearest"});
      } catch (err) {
        hidePlan();
        result.className = "result error";
        result.textContent = `${label} refused: ${err.message}`;
      }
    }

    if (isOperator) {
      document.getElementById("unload-preview").addEventListener("click", () => preview("unload"));
      document.getElementById("split-preview").addEventListener("click", () => preview("split"));
      document.getElementById("undo-preview").addEventListener("click", () => preview("undo"));
      document.getElementById("unload-destination").addEventListener("change", hidePlan);
      const algorithm = document.getElementById("split-algorithm");
      const positionsLabel = document.getElementById("split-positions-label");
      algorithm.addEventListener("change", () => {
        positionsLabel.hidden = algorithm.value !== "specified_positions_divide"; hidePlan(); });
      document.getElementById("plan-force").addEventListener("change", (ev) => {
        if (pending && pending.vetoed) document.getElementById("plan-confirm").disabled = !ev.target.checked;
      });
      document.getElementById("plan-cancel").addEventListener("click", hidePlan);
      document.getElementById("plan-confirm").addEventListener("click", async () => {
        if (!pending) return;
        const {url, body, label} = pending;
        if (pending.vetoed) body.force = document.getElementById("plan-force").checked;
        if (body.force) body.overrides = pending.overrides;  // what the preview showed, no more
        hidePlan();
        result.className = "result";
        result.textContent = `${label}…`;
        try {
          const answer = await post(url, body);
          result.textContent = answer.boundaries
            ? `Split ${answer.bundle} at ${answer.boundaries.join(", ")} into ${answer.children.length} bundles; they are placed by the next lookup or tick.`
            : `${answer.reverses ? `Undid audit row #${answer.reverses}: moved` : "Unloaded"} ${answer.bundle} from ${answer.source}; now on ${answer.destination || "nobody (placed by the next lookup)"}${answer.forced ? `, overriding the veto: ${answer.explanation}` : `. ${answer.explanation}`}`;
          ["unload-reason", "split-reason", "undo-reason"].forEach((id) => { document.getElementById(id).value = ""; });
          // Its last move is now this one: offered again once the bundle is seen on its new owner.
          document.getElementById("undo-form").hidden = true;
          refreshNow();
        } catch (err) {
          result.className = "result error";
          result.textContent = `${label} refused: ${err.message}`;
        }
      });
    }

    // The page of namespaces this map shows (``?page=&namespace=``), refreshed as it is.
    const pageQuery = new URLSearchParams({page: String(data.page.number), namespace: data.page.contains}).toString();
    const refreshNow = liveRefresh(`/api/bundle-map/?${pageQuery}`, (fresh) => { data = fresh; draw(); }, 5000);
    const asked = new URLSearchParams(location.search).get("bundle");
    if (asked && named(asked)) showPanel(named(asked));
    draw();
    wireClicks();
    connect();
  }

  // Drain and Activate, previewed in the page's #state-dialog: returns open(broker, verb).
  function stateDialog(result, done) {
    const dialog = document.getElementById("state-dialog");
    let pending = null;
    async function open(broker, verb) {
      result.className = "result"; result.textContent = "";
      try {
        const answer = await post(`/api/brokers/${encodeURIComponent(broker)}/${verb}/`, {preview: true});
        document.getElementById("state-title").textContent = `${verb === "drain" ? "Drain" : "Activate"} ${broker}?`;
        renderPlan(answer, {summary: document.getElementById("state-summary"),
          actions: document.getElementById("state-actions"), stats: document.getElementById("state-stats")});
        const confirmButton = document.getElementById("state-confirm");
        confirmButton.disabled = answer.vetoed;
        confirmButton.textContent = answer.vetoed ? "Refused" : `Confirm ${verb}`;
        document.getElementById("state-reason").value = "";
        pending = {broker, verb};
        dialog.showModal();
      } catch (err) {
        result.className = "result error";
        result.textContent = `${verb} ${broker} refused: ${err.message}`;
      }
    }
    document.getElementById("state-cancel").addEventListener("click", () => { dialog.close(); pending = null; });
    document.getElementById("state-confirm").addEventListener("click", async () => {
      if (!pending) return;
      const {broker, verb} = pending;
      const reason = document.getElementById("state-reason").value;
      dialog.close(); pending = null;
      result.className = "result"; result.textContent = `${verb} ${broker}…`;
      try {
        const answer = await post(`/api/brokers/${encodeURIComponent(broker)}/${verb}/`, {reason});
        result.textContent = `${answer.broker} is now ${answer.state}.`;
        done(answer);
      } catch (err) {
        result.className = "result error";
        result.textContent = `${verb} ${broker} refused: ${err.message}`;
      }
    });
    return open;
  }

  // The strategy config: a form from the registry, what-if against the current config, saves
  // as versions, rollback.
  function config(state, entries, isOperator) {
    const form = document.getElementById("config-form");
    const result = document.getElementById("result");
    const KIND = {shedder: "shedder", placement: "placement", split_algorithm: "split"};
    const entry = (kind, name) => entries.find((e) => e.kind === KIND[kind] && e.name === name);
    let values = state.values;

    function fill() {
      Object.keys(KIND).forEach((field) => {
        const select = form.elements[field];
        select.innerHTML = "";
        entries.filter((e) => e.kind === KIND[field]).forEach((e) => {
          const option = el("option", {value: e.name}, e.inConsole ? e.name : `${e.name} (not in the console)`);
          option.disabled = !e.inConsole;
          option.title = e.inConsole ? e.summary : e.whyNot;
          select.appendChild(option);
        });
        select.value = values[field];
      });
      form.elements.is_shedding_enabled.checked = values.is_shedding_enabled;
      form.elements.is_auto_split_enabled.checked = values.is_auto_split_enabled;
      form.elements.loop_interval_s.value = values.loop_interval_s;
      describe();
    }

    // Each chosen strategy's description and source; the parameters they read.
    function describe() {
      const keys = new Map();
      Object.keys(KIND).forEach((field) => {
        const e = entry(field, form.elements[field].value);
        const about = form.querySelector(`.strategy[data-kind="${field}"] .about`);
        about.textContent = e ? `${e.summary} — ${e.source}` : "";
        (e ? e.parameters : []).forEach((p) => keys.set(p.key, p));
      });
      const body = document.querySelector("#parameters tbody");
      const typed = {};
      body.querySelectorAll("input[data-key]").forEach((i) => { typed[i.dataset.key] = i.value; });
      body.innerHTML = "";
      [...keys.values()].sort((a, b) => a.key.localeCompare(b.key)).forEach((p) => {
        const tr = el("tr", {"data-key": p.key});
        tr.appendChild(el("td", {}, p.key));
        const cell = el("td");
        const input = el("input", {"data-key": p.key, size: 10, placeholder: String(p.default)});
        const current = p.key in typed ? typed[p.key] : values.parameters[p.key];
        input.value = current === undefined || current === null ? "" : String(current);
        input.disabled = !isOperator;
        input.addEventListener("input", markDirty);
        cell.appendChild(input);
        tr.appendChild(cell);
        const range = p.minimum === null && p.maximum === null ? "any" : `${p.minimum ?? "−∞"} … ${p.maximum ?? "∞"}`;
        [p.unit || "", String(p.default), range, p.source].forEach((v) => tr.appendChild(el("td", {}, v)));
        body.appendChild(tr);
      });
      if (!keys.size) body.appendChild(el("tr")).appendChild(el("td", {colspan: 6, class: "muted"}, "These strategies read no parameter."));
    }

    // The draft: the form's values; parameters typed as numbers or booleans, blanks left out
    // (the default applies), keys of strategies not chosen kept as they were.
    function draft() {
      const parameters = {...values.parameters};
      document.querySelectorAll("#parameters input[data-key]").forEach((input) => {
        const raw = input.value.trim();
        if (raw === "") { delete parameters[input.dataset.key]; return; }
        parameters[input.dataset.key] = raw === "true" ? true : raw === "false" ? false
          : (raw !== "" && !Number.isNaN(Number(raw))) ? Number(raw) : raw;
      });
      return {
        shedder: form.elements.shedder.value, placement: form.elements.placement.value,
        split_algorithm: form.elements.split_algorithm.value, parameters,
        is_shedding_enabled: form.elements.is_shedding_enabled.checked,
        is_auto_split_enabled: form.elements.is_auto_split_enabled.checked,
        loop_interval_s: Number(form.elements.loop_interval_s.value),
      };
    }
    // The input a refusal names (a field of the form, or "parameters.<key>"), marked and focused.
    function markInvalid(field) {
      form.querySelectorAll(".invalid").forEach((x) => { x.classList.remove("invalid"); x.removeAttribute("aria-invalid"); });
      if (!field) return;
      const key = field.startsWith("parameters.") ? field.slice("parameters.".length) : null;
      const input = key ? document.querySelector(`#parameters input[data-key="${key}"]`) : form.elements[field];
      if (!input || !input.classList) return;
      input.classList.add("invalid"); input.setAttribute("aria-invalid", "true"); input.focus();
    }
    form.addEventListener("input", (ev) => {
      if (ev.target.classList && ev.target.classList.contains("invalid")) {
        ev.target.classList.remove("invalid"); ev.target.removeAttribute("aria-invalid");
      }
    });
    const changes = () => {
      const d = draft();
      return Object.keys(d).filter((k) => JSON.stringify(d[k]) !== JSON.stringify(values[k]))
        .map((k) => `${k}: ${JSON.stringify(values[k])} → ${JSON.stringify(d[k])}`);
    };
    function markDirty() {
      const dirty = document.getElementById("dirty");
      if (dirty) dirty.textContent = changes().length ? `${changes().length} change(s) not saved` : "";
    }

    function versions() {
      const body = document.querySelector("#versions tbody");
      body.innerHTML = "";
      state.versions.forEach((v, i) => {
        const tr = el("tr", {"data-version": v.id});
        tr.appendChild(el("td", {}, `${v.id}${i === 0 ? " (current)" : ""}`));
        tr.appendChild(el("td", {}, utc(v.at)));
        tr.appendChild(el("td", {}, v.actor));
        tr.appendChild(el("td", {}, v.reason || "—"));
        const diff = el("td", {class: "diff"});
        const changed = Object.entries(v.changes || {});
        if (!changed.length) diff.textContent = "the values as found";
        changed.forEach(([k, [old, now]]) => {
          if (k !== "parameters") {
            diff.appendChild(el("div", {}, `${k}: ${JSON.stringify(old)} → ${JSON.stringify(now)}`));
            return;
          }
          // Parameters key by key: only those that changed ("default" where none was set).
          [...new Set([...Object.keys(old || {}), ...Object.keys(now || {})])].sort().forEach((key) => {
            const a = (old || {})[key], b = (now || {})[key];
            if (JSON.stringify(a) === JSON.stringify(b)) return;
            const said = (v) => (v === undefined ? "default" : JSON.stringify(v));
            diff.appendChild(el("div", {}, `${key}: ${said(a)} → ${said(b)}`));
          });
        });
        tr.appendChild(diff);
        const act = el("td");
        if (isOperator && i > 0) {
          const button = el("button", {class: "rollback"}, "Roll back to this…");
          button.addEventListener("click", async () => {
            if (!confirm(`Save version ${v.id}'s values as a new version? The shedding loop uses them from its next tick. Audited.`)) return;
            try {
              state = await post(`/api/config/versions/${v.id}/rollback/`, {reason: form.elements.reason.value});
              values = state.values; fill(); versions();
              result.className = "result"; result.textContent = state.saved ? `Rolled back: version ${state.saved} has version ${v.id}'s values.` : "Nothing to change: these are the current values.";
            } catch (err) { result.className = "result error"; result.textContent = `Rollback refused: ${err.message}`; }
          });
          act.appendChild(button);
        }
        tr.appendChild(act);
        body.appendChild(tr);
      });
    }

    Object.keys(KIND).forEach((field) => form.elements[field].addEventListener("change", () => { describe(); markDirty(); }));
    form.querySelectorAll(".loop-fields input").forEach((i) => i.addEventListener("change", markDirty));
    if (!isOperator) form.querySelectorAll("select, input").forEach((i) => { i.disabled = true; });
    if (isOperator) {
      document.getElementById("what-if").addEventListener("click", async () => {
        result.className = "result"; result.textContent = "Planning a cycle with each config…";
        try {
          const answer = await post("/api/config/", {values: draft(), what_if: true});
          const box = document.getElementById("what-if-result");
          box.hidden = false;
          const body = document.querySelector("#compare tbody");
          body.innerHTML = "";
          const rows = [
            ["strategy", (p) => p.strategy], ["reason", (p) => p.reason], ["plan", (p) => p.summary],
            ["unloads", (p) => p.actions.filter((a) => a.kind === "unload" && a.outcome === "planned").length],
            ["vetoed", (p) => p.actions.filter((a) => a.outcome === "vetoed").length],
            ["CV now → predicted", (p) => `${cvText(p.before.cv, p.before.serving)} → ${cvText(p.after.cv, p.after.serving)}`],
            ["max / mean now → predicted", (p) => `${p.before.maxOverMean.toFixed(2)} → ${p.after.maxOverMean.toFixed(2)}`],
          ];
          rows.forEach(([label, get]) => {
            const tr = el("tr");
            tr.appendChild(el("th", {}, label));
            tr.appendChild(el("td", {}, String(get(answer.current))));
            tr.appendChild(el("td", {}, String(get(answer.draft))));
            body.appendChild(tr);
          });
          ["current", "draft"].forEach((name) => {
            const list = document.getElementById(`${name}-actions`);
            renderPlan({summary: answer[name].summary, plan: {actions: answer[name].actions,
              stats: {before: answer[name].before, after: answer[name].after}}},
              {summary: el("span"), actions: list, stats: el("span")});
            if (!answer[name].actions.length) list.appendChild(el("li", {class: "muted"}, "no action"));
          });
          result.textContent = "What-if done: nothing was saved or moved.";
        } catch (err) { result.className = "result error"; result.textContent = `Draft refused: ${err.message}`; }
      });
      document.getElementById("replay").addEventListener("click", async () => {
        const button = document.getElementById("replay");
        button.disabled = true;
        result.className = "result"; result.textContent = "Replaying the last hour of recorded load with each config…";
        try {
          const answer = await post("/api/config/", {values: draft(), replay: true});
          document.getElementById("replay-result").hidden = false;
          document.getElementById("replay-span").textContent =
            `${answer.samples} snapshots, ${utc(answer.from)} – ${utc(answer.to)}`;
          replayCompare(document.querySelector("#replay-compare tbody"), "replay-chart", [
            ["recorded", answer.recorded, "#888"], ["current", answer.current, "#4e79a7"], ["draft", answer.draft, "#e15759"],
          ]);
          result.textContent = "Replay done: nothing was saved or moved.";
        } catch (err) { result.className = "result error"; result.textContent = `Replay refused: ${err.message}`; }
        finally { button.disabled = false; }
      });
      document.getElementById("save").addEventListener("click", async () => {
        const list = changes();
        if (!list.length) { result.className = "result"; result.textContent = "Nothing changed."; return; }
        // Checked before any confirm: a value the balancer refuses is marked on its field
        // (only such a refusal stops it: a check that could not run leaves it to the save).
        try { await post("/api/config/", {values: draft(), what_if: true}); } catch (err) {
          if (err.field) {
            markInvalid(err.field);
            result.className = "result error"; result.textContent = `Not saved: ${err.message}`;
            return;
          }
        }
        if (!confirm(`Save these changes as a new version?\n\n${list.join("\n")}\n\nThe shedding loop uses them from its next tick. Audited.`)) return;
        try {
          state = await post("/api/config/", {values: draft(), reason: form.elements.reason.value});
          values = state.values; fill(); versions(); markDirty();
          form.elements.reason.value = "";
          result.className = "result"; result.textContent = `Saved as version ${state.saved}.`;
        } catch (err) { result.className = "result error"; result.textContent = `Refused: ${err.message}`; }
      });
    }
    fill();
    versions();
    // A draft brought from the strategy advisor: in the form, not saved; preview, then save.
    if (state.draft) {
      const d = state.draft.changes;
      ["shedder", "placement"].forEach((f) => { if (d[f]) form.elements[f].value = d[f]; });
      describe();
      Object.entries(d.parameters || {}).forEach(([key, value]) => {
        const input = document.querySelector(`#parameters input[data-key="${key}"]`);
        if (input) input.value = String(value);
      });
      markDirty();
      result.className = "result";
      result.textContent = `Draft from the strategy advisor (run ${state.draft.run}, #${state.draft.rank}: ${state.draft.label}). Nothing is saved: try "What if?" or "Replay", then save it as a new version.`;
    }
  }

  // A broker's page: load over time with the moves that touched it as markers; Drain/Activate.
  function broker(name, initial, isOperator) {
    const result = document.getElementById("result");
    let history = initial;
    const moveTrace = (top) => ({type: "scatter", mode: "markers", name: "moves", x: history.moves.map((m) => m.at),
      y: history.moves.map(() => top), marker: {symbol: "triangle-down", size: 10, color: "#1d2330"},
      customdata: history.moves.map((m) => m.decision),
      hovertext: history.moves.map((m) => `${m.action} ${m.target}: ${m.source || "—"} → ${m.destination || "—"} (${m.actor})`),
      hoverinfo: "text+x"});
    const lines = (top) => history.moves.map((m) => ({type: "line", xref: "x", yref: "paper", x0: m.at, x1: m.at, y0: 0, y1: 1,
      line: {color: m.destination === name ? "#59a14f" : m.source === name ? "#e15759" : "#888", width: 1, dash: "dot"}}));
    function draw() {
      const range = [new Date(Date.now() - history.rangeS * 1000).toISOString(), new Date().toISOString()];
      const common = {margin: {t: 10, r: 60, b: 40, l: 60}, legend: {orientation: "h"}, hovermode: "x unified",
        xaxis: {type: "date", range, title: {text: "time (UTC)"}}, shapes: lines()};
      Plotly.react("usage-chart", [
        {type: "scatter", mode: "lines", name: "CPU %", x: history.at, y: history.cpu},
        {type: "scatter", mode: "lines", name: "bandwidth in %", x: history.at, y: history.bandwidthIn},
        {type: "scatter", mode: "lines", name: "bandwidth out %", x: history.at, y: history.bandwidthOut},
        moveTrace(Math.max(10, ...[...history.cpu, ...history.bandwidthIn, ...history.bandwidthOut].filter((v) => v !== null)))],
        {...common, yaxis: {title: {text: "% of capacity"}, rangemode: "tozero"}}, {displayModeBar: false, responsive: true});
      Plotly.react("rate-chart", [
        {type: "scatter", mode: "lines", name: "msg rate (msg/s)", x: history.at, y: history.msgRate},
        {type: "scatter", mode: "lines", name: "throughput (bytes/s)", x: history.at, y: history.throughput, yaxis: "y2"}],
        {...common, yaxis: {title: {text: "msg/s"}, rangemode: "tozero"},
         yaxis2: {title: {text: "bytes/s"}, overlaying: "y", side: "right", rangemode: "tozero"}}, {displayModeBar: false, responsive: true});
      document.getElementById("range-note").textContent =
        `${history.at.length} points, ${history.moves.length} moves touching ${name}; green: a bundle arrived, red: one left.`;
    }
    const url = () => `/api/brokers/${encodeURIComponent(name)}/history/?range=${history.rangeS}`;
    document.querySelectorAll("button.range").forEach((button) => button.addEventListener("click", async () => {
      document.querySelectorAll("button.range").forEach((b) => b.classList.toggle("on", b === button));
      history = {...history, rangeS: Number(button.dataset.range)};
      const response = await fetch(url(), {credentials: "same-origin"});
      if (response.ok) { history = await response.json(); draw(); }
    }));
    const refresh = liveRefresh({toString: url}, (fresh) => { history = fresh; draw(); }, 10000);
    const progress = document.getElementById("drain-progress");
    if (progress) {
      progress.textContent = drainSaid(JSON.parse(document.getElementById("drain-data").textContent));
      // Live while it drains: the same figures as the domains page's card.
      liveRefresh("/api/domains/", (fresh) => {
        const row = fresh.domains.flatMap((d) => d.brokers).find((b) => b.name === name);
        progress.textContent = row && row.drain ? drainSaid(row.drain) : "";
      }, 2000);
    }
    if (isOperator) {
      const open = stateDialog(result, () => location.reload());
      document.querySelectorAll("button.drain, button.activate").forEach((button) =>
        button.addEventListener("click", () => open(name, button.classList.contains("drain") ? "drain" : "activate")));
    }
    draw();
    const chart = document.getElementById("usage-chart");
    chart.on("plotly_click", (ev) => {
      const point = ev.points.find((p) => p.data.name === "moves");
      if (point && point.customdata) location.href = `/decisions/${point.customdata}/`;
    });
    connect();
    return refresh;
  }

  // Broker cards a failure domain shows before "Show all" (a domain of 200 brokers stays a page).
  const DOMAIN_CARDS = 24;

  function domains(initial, isOperator) {
    let data = initial;
    const result = document.getElementById("result");
    const expanded = new Set();  // the domains whose every card is shown
    const filter = document.getElementById("domains-filter");
    if (filter) filter.addEventListener("input", () => draw());

    function markers(broker) {
      return data.groups.filter((g) => g.brokers[broker]).map((g) => ({group: g.group, namespaces: g.brokers[broker],
        violated: g.violations.some((v) => v.broker === broker)}));
    }

    function draw() {
      document.getElementById("domains-note").textContent =
        `failure domains ${data.failureDomainsEnabled ? "enabled" : "disabled"} (failureDomainsEnabled); as of ${utc(data.at)}`;
      const root = document.getElementById("domains");
      root.innerHTML = "";
      const violatedDomains = new Set(data.groups.flatMap((g) => g.violations.filter((v) => v.domain).map((v) => v.domain)));
      const violating = new Set(data.groups.flatMap((g) => g.violations.map((v) => v.broker)));
      // A broker that needs a look (not active, draining, hot, or holding a violation) comes first.
      const attention = (b) => (b.state !== "active" || b.drain || b.score >= 85 || violating.has(b.name) ? 0 : 1);
      const q = filter ? filter.value.trim().toLowerCase() : "";
      data.domains.forEach((domain) => {
        const column = el("section", {class: `domain${violatedDomains.has(domain.name) ? " violated" : ""}`, "data-domain": domain.name});
        const serving = domain.brokers.filter((b) => b.state === "active").length;
        column.appendChild(el("h2", {}, `${domain.name}`));
        column.appendChild(el("p", {class: "muted"}, `${domain.brokers.length} brokers, ${serving} active`));
        const kept = domain.brokers.filter((b) => !q || b.name.toLowerCase().includes(q) || b.state.includes(q))
          .sort((a, b) => attention(a) - attention(b) || (a.name < b.name ? -1 : 1));
        const all = expanded.has(domain.name) || kept.length <= DOMAIN_CARDS;
        const shown = all ? kept : kept.slice(0, DOMAIN_CARDS);
        if (q) column.appendChild(el("p", {class: "muted"}, `${kept.length} whose name or state contains “${q}”`));
        shown.forEach((b) => {
          const card = el("article", {class: `broker-card state-${b.state}`, "data-broker": b.name});
          const head = el("header");
          const title = el("b");
          title.appendChild(el("a", {href: `/brokers/${encodeURIComponent(b.name)}/`}, b.name));
          head.appendChild(title);
          head.appendChild(el("span", {class: "rank", title: "rank, least loaded first"}, `#${b.rank}`));
          head.appendChild(el("span", {class: `state ${b.state}`}, b.state));
          card.appendChild(head);
          const bar = el("div", {class: "usage", title: `weighted max usage ${b.score} %`});
          const fill = el("div", {class: "fill"});
          fill.style.width = `${Math.min(100, b.score)}%`;
          fill.classList.toggle("hot", b.score >= 85);
          bar.appendChild(fill);
          card.appendChild(bar);
          card.appendChild(el("p", {}, `usage ${b.score} % · CPU ${b.cpu} % · ${b.bundles} bundles · ${fmtBytes(b.throughput)}`));
          if (b.drain) card.appendChild(el("p", {class: `drain-progress ${b.drain.state}`, role: "status"}, drainSaid(b.drain)));
          const tags = el("p", {class: "tags"});
          markers(b.name).forEach((m) => tags.appendChild(el("span", {class: `tag${m.violated ? " violated" : ""}`,
            title: m.namespaces.join(", ")}, `⚑ ${m.group}: ${m.namespaces.length} ns`)));
          card.appendChild(tags);
          if (isOperator) {
            const actions = el("p", {class: "actions"});
            if (b.state === "active") actions.appendChild(el("button", {class: "drain", "data-broker": b.name}, "Drain…"));
            else actions.appendChild(el("button", {class: "activate", "data-broker": b.name}, "Activate…"));
            card.appendChild(actions);
          }
          column.appendChild(card);
        });
        if (kept.length > DOMAIN_CARDS) {
          column.appendChild(el("button", {class: "more", "data-domain": domain.name, type: "button"},
            all ? `Show the first ${DOMAIN_CARDS} only` : `Show all ${kept.length} brokers (${kept.length - DOMAIN_CARDS} more)`));
        }
        root.appendChild(column);
      });
      root.querySelectorAll("button.more").forEach((button) => button.addEventListener("click", () => {
        const name = button.dataset.domain;
        if (expanded.has(name)) expanded.delete(name); else expanded.add(name);
        draw();
      }));
      const violations = document.getElementById("violations");
      violations.innerHTML = "";
      const all = data.groups.flatMap((g) => g.violations);
      if (all.length) {
        violations.appendChild(el("h2", {}, `${all.length} anti-affinity violation${all.length > 1 ? "s" : ""}`));
        const ul = el("ul");
        all.forEach((v) => ul.appendChild(el("li", {}, v.reason)));
        violations.appendChild(ul);
      } else {
        violations.appendChild(el("p", {class: "ok"}, "No anti-affinity violation: every group is spread as Pulsar's placement filter wants."));
      }
      const body = document.querySelector("#groups tbody");
      body.innerHTML = "";
      data.groups.forEach((g) => {
        const tr = el("tr", {"data-group": g.group});
        [g.group, g.namespaces.join(", "),
         Object.entries(g.brokers).map(([b, ns]) => `${b} (${ns.length})`).join(", ") || "none yet",
         Object.entries(g.domains).map(([d, n]) => `${d}: ${n}`).join(", "),
         g.violations.length ? g.violations.map((v) => v.reason).join("; ") : "none"]
          .forEach((v) => tr.appendChild(el("td", {}, v)));
        body.appendChild(tr);
      });
      if (!data.groups.length) body.appendChild(el("tr")).appendChild(el("td", {colspan: 5, class: "muted"}, "No namespace has an anti-affinity group."));
      root.querySelectorAll("button.drain, button.activate").forEach((button) =>
        button.addEventListener("click", () => openState(button.dataset.broker, button.classList.contains("drain") ? "drain" : "activate")));
    }

    const openState = stateDialog(result, () => refreshNow());
    const refreshNow = liveRefresh("/api/domains/", (fresh) => { data = fresh; draw(); }, 2000);
    draw();
    connect();
  }


  // The Pulsar page: the attached connection, control (previewed, confirmed), the executor and
  // the moves with what verifying them found. Polled every 3 s and on every live event.
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  // The Pulsar page's evidence before control: the recorded hour or day, observed and replayed.
  async function evidence() {
    const say = document.getElementById("evidence-say");
    const button = document.getElementById("evidence-run");
    if (!say || !button) return;
    const window_ = document.getElementById("evidence-window").value;
    button.disabled = true;
    say.className = "muted"; say.textContent = `Replaying the last ${window_} of recorded load with Fulcrum's current config…`;
    try {
      const answer = await get(`/api/pulsar/evidence/?window=${encodeURIComponent(window_)}`);
      if (answer.unavailable) { say.className = "muted"; say.textContent = `No comparison yet: ${answer.unavailable}.`; return; }
      const who = !answer.attached ? "what the cluster did" : answer.inControl ? "Fulcrum in control" : "Pulsar's own shedder";
      document.getElementById("evidence-observed").textContent = `Observed (${who})`;
      document.getElementById("evidence-fulcrum").textContent = `Fulcrum replayed (${answer.fulcrum.strategy})`;
      document.getElementById("evidence-span").textContent =
        `${answer.samples} snapshots, ${utc(answer.from)} – ${utc(answer.to)} (` +
        (answer.hours < 1 ? `${Math.round(answer.hours * 60)} min)` : `${answer.hours.toFixed(1)} h)`);
      document.getElementById("evidence-compare").hidden = false;
      document.getElementById("evidence-chart").hidden = false;
      replayCompare(document.querySelector("#evidence-compare tbody"), "evidence-chart", [
        [`observed (${who})`, answer.observed, "#888"],
        ["Fulcrum replayed", answer.fulcrum, "#4e79a7"],
      ]);
      const o = answer.observed.maxOverMeanMedian, f = answer.fulcrum.maxOverMeanMedian;
      say.className = "";
      say.textContent = (o === null || f === null) ? "Not enough load recorded to compare." :
        `Over the last ${answer.window}: median max / mean ${o.toFixed(2)} observed, ${f.toFixed(2)} with Fulcrum's plans — ` +
        `${plural(answer.observed.moves, "move")} observed, ${plural(answer.fulcrum.moves, "move")} planned by the replay.`;
    } catch (err) { say.className = "result error"; say.textContent = `No comparison yet: ${err.message}`; }
    finally { button.disabled = false; }
  }

  function pulsar(initial, isOperator, isAdmin) {
    const result = document.getElementById("result");
    const root = document.getElementById("connection");
    let data = initial;
    const evidenceButton = document.getElementById("evidence-run");
    if (evidenceButton) {
      evidenceButton.addEventListener("click", evidence);
      document.getElementById("evidence-window").addEventListener("change", evidence);
      evidence();
    }
    const say = (text, cls) => { result.textContent = text; result.className = `result ${cls || ""}`; };
    const age = (iso) => iso ? `${Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000))} s ago` : "never";
    const time = (iso) => iso ? new Date(iso).toISOString().slice(11, 19) : "—";
    const short = (cls) => (cls || "unknown").split(".").pop();

    function draw() {
      root.innerHTML = "";
      const attached = data.connections.find((c) => c.attached);
      if (!attached) {
        root.appendChild(el("h2", {}, "No cluster attached"));
        root.appendChild(el("p", {}, "Fulcrum balances its own simulator. To attach a Pulsar cluster, set FULCRUM_PULSAR_URL (and FULCRUM_PULSAR_TOKEN, a superuser's token) in the environment, or add a Pulsar connection in the admin and mark it attached. It starts observe-only."));
      } else {
        const o = attached.observation || {};
        const control = attached.mode === "control";
        const head = el("h2", {}, `${attached.name} `);
        head.appendChild(el("span", {class: `badge ${control ? "ok" : "muted"}`, id: "mode"}, control ? "Fulcrum in control" : "observe-only"));
        if (control) head.appendChild(el("span", {class: `badge ${attached.executorStopped ? "warn" : "ok"}`, id: "executor"}, attached.executorStopped ? "executor stopped" : "executor running"));
        root.appendChild(head);
        const facts = el("dl", {class: "facts"});
        const fact = (k, v) => { facts.appendChild(el("dt", {}, k)); facts.appendChild(el("dd", {}, v)); };
        fact("Admin URL", attached.adminUrl);
        fact("Authentication", attached.auth || attached.token);
        if (attached.tlsCaFile) fact("TLS CA", attached.tlsCaFile);
        const staleS = attached.observedAt ? (Date.now() - Date.parse(attached.observedAt)) / 1000 : Infinity;
        const stale = staleS > 3 * (data.observeS || 15);
        facts.appendChild(el("dt", {}, "Observed"));
        facts.appendChild(el("dd", stale ? {class: "warn", id: "observed"} : {id: "observed"},
          `${time(attached.observedAt)} UTC (${age(attached.observedAt)})${o.adminCalls !== undefined ? `, in ${o.adminCalls} admin calls` : ""}` +
          (stale ? ` — no observation since, although one is due every ${data.observeS || 15} s: is a Celery worker running (its pulsar queue)? The facts below are as last observed.` : "")));
        const source = {configured: "as configured, checked against the brokers' own clusterName", clusterName: "the brokers' own clusterName", "the only cluster listed": "the only cluster Pulsar lists"}[o.clusterSource] || "";
        fact("Cluster", `${o.cluster || "?"}${source ? ` — ${source}` : ""}; leader ${o.leader || "unknown"}`);
        fact("Load manager", `${short(o.loadManager)}${o.extensible ? " (load from /metrics and topic stats)" : ""}`);
        fact("Pulsar version", o.version || "unknown" + (o.version ? "" : " (no broker said)"));
        fact("Brokers", String(o.brokers ?? "?"));
        fact("Bundles", `${o.bundles ?? "?"}: ${o.owned ?? "?"} owned, ${o.unowned ?? "?"} unowned (Pulsar assigns those at the next lookup)`);
        fact("Load reports", `${o.reports ?? 0} accepted (each dated when Fulcrum read it)${o.unchanged ? `; ${o.unchanged} older than the broker's last accepted one` : ""}`);
        fact("Moves in flight", `${attached.inFlight} of at most ${attached.maxMovesInFlight} sent at once`);
        const dm = data.deadman || {};
        if (control) {
          const tick = dm.lastTickAt ? Date.parse(dm.lastTickAt) : null;
          const taken = attached.controlledAt ? Date.parse(attached.controlledAt) : null;
          const ago = (t) => `${Math.max(0, Math.round((Date.now() - t) / 1000))} s ago`;
          const last = tick !== null && (taken === null || tick >= taken)
            ? `the shedding loop's last tick ${ago(tick)}`
            : `control taken ${taken !== null ? ago(taken) : "?"}, no tick of the shedding loop since`;
          if (dm.alive) {
            fact("Dead-man", `watching: ${last}; after ${Math.round(dm.limitS || 0)} s without a tick, control goes back to Pulsar (its shedding on again), from a process of its own`);
          } else {
            facts.appendChild(el("dt", {}, "Dead-man"));
            facts.appendChild(el("dd", {class: "warn", id: "deadman-missing"}, `not running: no process watches the loop (${last}); start manage.py deadman (the Procfile's deadman line), or Pulsar is left without a balancer if the loop stops`));
          }
        }
        const lb = o.lbConfig || {};
        if (Object.keys(lb).length) {
          const on = (k) => lb[k] === undefined ? "?" : (lb[k] === "true" ? "on" : "off");
          fact("Pulsar's shedding", `${on("loadBalancerSheddingEnabled")} (${lb.loadBalancerLoadSheddingStrategy ? short(lb.loadBalancerLoadSheddingStrategy) : "?"}, every ${lb.loadBalancerSheddingIntervalMinutes ?? "?"} min, grace period ${lb.loadBalancerSheddingGracePeriodMinutes ?? "?"} min); auto-split ${on("loadBalancerAutoBundleSplitEnabled")}; placement ${lb.loadBalancerLoadPlacementStrategy ? short(lb.loadBalancerLoadPlacementStrategy) : "?"}`);
        }
        root.appendChild(facts);
        if (o.failure) root.appendChild(el("p", {class: "error"}, `Last observation failed at ${time(o.failedAt)} UTC: ${o.failure}`));
        const trouble = attached.trouble || [];
        if (trouble.length) {
          // Made by the console (selectors.pulsar_trouble): slow or missing observations,
          // failing admin calls, moves late — each naming the broker and the call.
          const box = el("div", {class: "warn", id: "trouble"});
          box.appendChild(el("strong", {}, "Trouble observing or acting on Pulsar"));
          const ul = el("ul");
          trouble.forEach((t) => ul.appendChild(el("li", {"data-kind": t.kind}, t.text)));
          box.appendChild(ul);
          root.appendChild(box);
        }
        const conflict = attached.conflict || {};
        if (control && conflict.at) {
          const box = el("div", {class: "error", id: "conflict"});
          box.appendChild(el("p", {}, `Two balancers since ${time(conflict.at)} UTC: ${conflict.why}. Fulcrum's executor is stopped and sends nothing until an admin decides: re-assert its control (${(conflict.keys || []).join(", ")} set off again, the executor started) or release control to Pulsar.`));
          if (isAdmin) {
            const b = el("button", {id: "reassert", class: "primary"}, "Re-assert control…");
            b.addEventListener("click", () => openControl(attached, "reassert"));
            box.appendChild(b);
          }
          root.appendChild(box);
        }
        const back = attached.handedBack || {};
        if (!control && back.at) {
          root.appendChild(el("p", {class: "error", id: "handed-back"}, `Control was handed back to Pulsar by ${back.by} at ${time(back.at)} UTC: ${back.why}. Pulsar balances the cluster again; take control once Fulcrum's loop runs.`));
        }
        const problems = [...(o.refused || []), ...(o.errors || [])];
        if (problems.length) {
          const box = el("details", {class: "warn"});
          box.appendChild(el("summary", {}, `${problems.length} answer(s) refused or unread in the last observation`));
          const ul = el("ul");
          problems.forEach((p) => ul.appendChild(el("li", {}, p)));
          box.appendChild(ul);
          root.appendChild(box);
        }
        const reads = Object.entries(o.brokerReads || {});
        if (reads.length) {
          const box = el("details", {id: "broker-reads"});
          const lacking = reads.filter(([, r]) => (r.missing || []).length).length;
          box.appendChild(el("summary", {}, `How each broker was read (${reads.length}${lacking ? `; ${lacking} with figures missing` : ""})`));
          const table = el("table", {class: "compact"});
          const head = el("tr");
          ["Broker", "Its URL (as Pulsar named it)", "Read (UTC)", "Pulsar's lastUpdate (UTC) — its last write of the report, information only", "Calls", "Figures missing"].forEach((h) => head.appendChild(el("th", {}, h)));
          table.appendChild(el("thead")).appendChild(head);
          const tbody = el("tbody");
          reads.forEach(([name, r]) => {
            const tr = el("tr", {"data-broker": name});
            const written = r.lastUpdate ? `${time(r.lastUpdate)} (${age(r.lastUpdate)})` : "— (none: extensible load manager)";
            [name, r.url || "—", time(r.readAt), written, String(r.calls ?? "")].forEach((v) => tr.appendChild(el("td", {}, v)));
            tr.appendChild(el("td", (r.missing || []).length ? {class: "warn"} : {}, (r.missing || []).join("; ") || "none"));
            tbody.appendChild(tr);
          });
          table.appendChild(tbody);
          box.appendChild(table);
          if (lacking) box.open = true;
          root.appendChild(box);
        }
        const actions = el("p");
        if (isAdmin) {
          const b = el("button", {id: "control", class: control ? "" : "primary"}, control ? "Release control…" : "Take control…");
          b.addEventListener("click", () => openControl(attached));
          actions.appendChild(b);
        }
        if (isOperator && control && !conflict.at) {
          const b = el("button", {id: "executor-toggle"}, attached.executorStopped ? "Start the executor" : "Stop the executor…");
          b.addEventListener("click", () => toggleExecutor(attached));
          actions.appendChild(document.createTextNode(" "));
          actions.appendChild(b);
        }
        actions.appendChild(el("span", {class: "muted"}, control && conflict.at
          ? " Pulsar's own balancing is on again: Fulcrum sends nothing until an admin decides."
          : control
          ? " Pulsar's own shedding is off; Fulcrum's moves are sent as unloads with a destination (or splits) and verified."
          : " Fulcrum records its plans without sending them. Taking control turns Pulsar's own shedding off first."));
        root.appendChild(actions);
      }
      const body = document.querySelector("#moves tbody");
      body.innerHTML = "";
      data.moves.forEach((m) => {
        const tr = el("tr", {"data-move": m.id, "data-state": m.state});
        const waited = m.sentAt ? Math.max(0, Math.round((Date.now() - Date.parse(m.sentAt)) / 1000)) : 0;
        const outcome = (m.outcome ? m.outcome : (m.state === "verifying" ? `observing (sent ${waited} s ago)` : "")) +
          (m.attempts > 1 ? ` (${m.attempts} sends)` : "");
        [m.id, time(m.createdAt), m.kind, m.bundle, `${m.source} → ${m.destination || (m.kind === "split" ? "same broker" : "Pulsar's choice")}`,
         m.state, outcome, m.outcomeReason].forEach((v, i) => tr.appendChild(el("td", i === 6 && m.outcome ? {class: `outcome ${m.outcome}`} : {}, String(v ?? ""))));
        body.appendChild(tr);
      });
      if (!data.moves.length) body.appendChild(el("tr")).appendChild(el("td", {colspan: 8, class: "muted"}, "No move sent to Pulsar yet."));
      const others = document.getElementById("others");
      others.innerHTML = "";
      const rest = data.connections.filter((c) => !c.attached);
      if (rest.length) {
        others.appendChild(el("h2", {}, "Other connections (stored, not attached)"));
        const ul = el("ul");
        rest.forEach((c) => ul.appendChild(el("li", {}, `${c.name}: ${c.adminUrl} (token: ${c.token}); attach it in the admin`)));
        others.appendChild(ul);
      }
    }

    async function refresh() {
      try {
        const response = await fetch("/api/pulsar/", {credentials: "same-origin"});
        if (response.ok) { data = await response.json(); draw(); }
      } catch (err) { /* the next poll retries */ }
    }

    const dialog = document.getElementById("control-dialog");
    let pending = null;
    async function openControl(connection, wanted) {
      say("Reading Pulsar's configuration…");
      try {
        const query = wanted ? `?action=${wanted}` : "";
        const response = await fetch(`/api/pulsar/${connection.id}/control/${query}`, {credentials: "same-origin"});
        const body = await response.json();
        if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
        pending = {id: connection.id, action: body.action};
        const take = body.action === "take";
        const titles = {take: "Take control of", release: "Release control of", reassert: "Re-assert control of"};
        document.getElementById("control-title").textContent = `${titles[body.action]} ${body.connection}`;
        document.getElementById("control-summary").textContent = take
          ? "Pulsar's own shedding is turned off (cluster-wide dynamic configuration) so that it never fights Fulcrum; the values below are recorded and restored when control is released. Fulcrum's executor then sends the balancer's moves."
          : body.action === "reassert"
            ? "Pulsar's own balancing is on again although Fulcrum holds control. Re-asserting sets it off again (the values Fulcrum will restore on release stay those recorded when control was taken) and starts Fulcrum's executor again."
            : `Pulsar's configuration is put back as it was; ${body.inFlight} move(s) in flight: queued ones are cancelled, those sent are still verified. Fulcrum goes back to observe-only.`;
        const tbody = document.querySelector("#control-changes tbody");
        tbody.innerHTML = "";
        body.changes.forEach((c) => {
          const tr = el("tr");
          [c.key, c.effective || "?", c.override ?? "none", c.to, c.how].forEach((v) => tr.appendChild(el("td", {}, v)));
          tbody.appendChild(tr);
        });
        document.getElementById("control-note").textContent = "Audited with your name.";
        say("");
        dialog.showModal();
      } catch (err) { say(err.message, "error"); }
    }
    document.getElementById("control-cancel").addEventListener("click", () => dialog.close());
    document.getElementById("control-confirm").addEventListener("click", async () => {
      dialog.close();
      if (!pending) return;
      try {
        const body = await post(`/api/pulsar/${pending.id}/control/`, {action: pending.action, confirm: true});
        data = body;
        say({take: "Control taken: Pulsar's shedding is off.", release: "Control released: Pulsar's configuration is restored.", reassert: "Control re-asserted: Pulsar's shedding is off again, the executor runs."}[pending.action], "ok");
        draw();
      } catch (err) { say(err.message, "error"); }
    });

    async function toggleExecutor(connection) {
      const stop = !connection.executorStopped;
      if (stop && !window.confirm("Stop the executor? Queued moves are cancelled; moves already sent to Pulsar are still verified. The balancer's plans are recorded, not sent.")) return;
      try {
        data = await post(`/api/pulsar/${connection.id}/executor/`, {stopped: stop});
        say(stop ? "Executor stopped." : "Executor started.", "ok");
        draw();
      } catch (err) { say(err.message, "error"); }
    }

    on("balancer.bundle_moved", () => refresh());
    setInterval(refresh, 3000);
    draw();
    connect();
  }

  // The audit page: Undo… on a completed unload (operators): a preview of the move back (the same
  // vetoes as any unload, which the operator may override), then the confirmed undo.
  function audit(isOperator) {
    const result = document.getElementById("result");
    const dialog = document.getElementById("undo-dialog");
    if (!isOperator || !dialog) return;
    const parts = {
      summary: document.getElementById("undo-summary"),
      actions: document.getElementById("undo-actions"),
      stats: document.getElementById("undo-stats"),
    };
    const force = document.getElementById("undo-force");
    const forceRow = document.getElementById("undo-force-row");
    const confirmButton = document.getElementById("undo-confirm");
    let pending = null;
    const say = (text, cls) => { result.textContent = text; result.className = `result ${cls || ""}`; };

    async function preview(button) {
      pending = button;
      force.checked = false;
      say("Planning the move back…");
      try {
        const body = await post(`/api/audit/${button.dataset.audit}/undo/`, {preview: true});
        document.getElementById("undo-title").textContent =
          `Undo: ${button.dataset.bundle} back to ${button.dataset.from} (now on ${button.dataset.to})`;
        renderPlan(body, parts);
        forceRow.hidden = !body.overridable;
        document.getElementById("undo-force-what").textContent = overrideSaid(body.overrides);
        overrides = body.overrides || [];
        vetoed = body.vetoed;  // a veto: confirmed only with the override ticked
        confirmButton.disabled = vetoed;
        if (body.vetoed) parts.summary.textContent = `Vetoed: ${body.summary}`;
        say("");
        dialog.showModal();
      } catch (err) { say(err.message, "error"); }
    }
    let vetoed = false, overrides = [];
    force.addEventListener("change", () => { confirmButton.disabled = vetoed && !force.checked; });
    document.getElementById("undo-cancel").addEventListener("click", () => dialog.close());
    confirmButton.addEventListener("click", async () => {
      dialog.close();
      if (!pending) return;
      try {
        const body = await post(`/api/audit/${pending.dataset.audit}/undo/`, {
          reason: document.getElementById("undo-reason").value, force: force.checked,
          ...(force.checked ? {overrides} : {}),
        });
        say(`Undone: ${body.bundle} ${body.source} → ${body.destination} (audit row ${body.audit}).`, "ok");
        setTimeout(() => location.reload(), 1200);
      } catch (err) { say(err.message, "error"); }
    });
    document.querySelectorAll("button.undo").forEach((b) => b.addEventListener("click", () => preview(b)));
  }

  return {dashboard, config, decision, broker, bundles, bundleMap, domains, reports, pulsar, audit, on, connect};
})();
