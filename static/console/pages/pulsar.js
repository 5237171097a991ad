// Imported by templates/console/pulsar.html, which calls pulsar() with the page's data.

import {connect, on} from "../shared/live.js";
import {get, post} from "../shared/http.js";
import {el, utc} from "../shared/dom.js";
import {replayCompare} from "../shared/charts.js";

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
    const o = answer.observed.maxOverMeanMedian, f = answer.fulcrum.maxOverMeanMedian;
    // Nothing to compare (no load in the window's snapshots yet): no table of dashes, no chart.
    const compared = o !== null && f !== null;
    document.getElementById("evidence-compare").hidden = !compared;
    document.getElementById("evidence-chart").hidden = !compared;
    if (compared) {
      replayCompare(document.querySelector("#evidence-compare tbody"), "evidence-chart", [
        [`observed (${who})`, answer.observed, "#888"],
        ["Fulcrum replayed", answer.fulcrum, "#4e79a7"],
      ]);
    }
    say.className = "";
    say.textContent = !compared ? `Not enough load recorded over the last ${answer.window} to compare yet.` :
      `Over the last ${answer.window}: median max / mean ${o.toFixed(2)} observed, ${f.toFixed(2)} with Fulcrum's plans — ` +
      `${plural(answer.observed.moves, "move")} observed, ${plural(answer.fulcrum.moves, "move")} planned by the replay.`;
  } catch (err) { say.className = "result error"; say.textContent = `No comparison yet: ${err.message}`; }
  finally { button.disabled = false; }
}

export function pulsar(initial, isOperator, isAdmin) {
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
