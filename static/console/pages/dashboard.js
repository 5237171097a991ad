// The dashboard, imported by templates/console/dashboard.html, which calls dashboard() with the
// page's data: the CV over time, the brokers' rankings a page at a time, the decisions, the
// balance panel and the loop's health, all live.

import {connect, on} from "../shared/live.js";
import {post} from "../shared/http.js";
import {cvText, el, fmtBytes, utc} from "../shared/dom.js";

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

export function dashboard(series, feed, health, initialRankings, balance, pageRows) {
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
