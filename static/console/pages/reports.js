// Imported by templates/console/reports.html, which calls reports() with the page's data.

import {connect, on} from "../shared/live.js";
import {post} from "../shared/http.js";
import {el, fmtBytes, pct, utc} from "../shared/dom.js";

// The history page: Spark runs with live progress and cancel; the newest report's charts and
// the newest advisor's ranking, read from the runs' result files through the API.
export function reports(latest, isOperator) {
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
// Twenty colours (D3's category20), so that up to twenty lines (the 20 hottest brokers, the
// namespaces) never share one, as Plotly's ten would from the eleventh.
const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
  "#c7c7c7", "#dbdb8d", "#9edae5"];
const HOUR_MS = 3600 * 1000;
// An hourly axis with one hour in it spans that hour's neighbours, not Plotly's few milliseconds.
const hourly = (xs) => {
  const times = [...new Set(xs.map((x) => Date.parse(x)))];
  return times.length === 1
    ? {range: [new Date(times[0] - HOUR_MS).toISOString(), new Date(times[0] + HOUR_MS).toISOString()]} : {};
};
// The legend above the plot: below it, it covered the time axis's title and its date.
const layoutOf = (y, extra, xs) => ({margin: {t: 40, r: 60, b: 40, l: 70}, colorway: COLOURS,
  xaxis: {type: "date", title: {text: "UTC"}, automargin: true, ...hourly(xs || [])},
  yaxis: {title: {text: y}, rangemode: "tozero", automargin: true},
  legend: {orientation: "h", x: 0, y: 1.02, yanchor: "bottom"}, ...(extra || {})});

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
  Plotly.newPlot("load-chart", lines, layoutOf("CPU p95 %", {}, hours.map((r) => r.hour)), CHART);
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
    layoutOf("throughput (bytes/s)", {}, namespaces.map((r) => r.hour)), CHART);
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
