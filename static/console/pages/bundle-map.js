// The bundle map, imported by templates/console/bundle_map.html, which calls bundleMap() with the
// page's data: every bundle by namespace and hash range, or as a treemap by owner; a bundle's
// panel, and for operators its unload, split and undo.

import {connect, liveRefresh} from "../shared/live.js";
import {post} from "../shared/http.js";
import {el, fmtBytes, pct, utc} from "../shared/dom.js";
import {overrideSaid, renderPlan} from "../shared/plans.js";

// A stable colour per broker: its position among the brokers by name. Okabe & Ito's
// colour-blind-safe palette (and Tol's wine for an eighth): told apart with deuteranopia too
// (tests/console/test_map_colours.py); beyond eight, hues by the golden angle.
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
                 "#882255"];
const colourOf = (index) => index < PALETTE.length ? PALETTE[index]
  : `hsl(${Math.round((index * 137.508) % 360)}, 55%, 50%)`;
const hex = (n) => `0x${n.toString(16).padStart(8, "0")}`;

// Where an applied unload's bundle is now: on its destination, or (an attached Pulsar cluster in
// control) on its way there, verified once Pulsar is seen doing it.
function landed(answer) {
  const to = answer.destination || "nobody (placed by the next lookup)";
  if (!answer.inFlight) return `now on ${to}`;
  return `sent to Pulsar, moving to ${answer.destination || "the broker Pulsar places it on"}; verified by observing`;
}

export function bundleMap(initial, isOperator) {
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
          // A break after the range's "_" (a zero-width space), not anywhere in a hash.
          [c.bundle.split("/").pop().replace("_", "_\u200b"), pct(c.fraction), fmtBytes(c.throughput), `${Math.round(c.msgRate)} msg/s`, c.topics]
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
          : `${answer.reverses ? `Undid audit row #${answer.reverses}: moved` : "Unloaded"} ${answer.bundle} from ${answer.source}; ${landed(answer)}${answer.forced ? `, overriding the veto: ${answer.explanation}` : `. ${answer.explanation}`}`;
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
