// Plans previewed before an operator confirms them: the plan as the balancer made it, the
// brokers' Drain/Activate dialog (templates/console/_state_dialog.html) and what an override passes.

import {post} from "./http.js";
import {cvText, el, pct} from "./dom.js";

// What an override passes, as the preview listed it (nothing else is overridden).
export const overrideSaid = (overrides) => (overrides && overrides.length)
  ? `: ${overrides.join(" and ")}, as the preview shows` : "";

// The plan of an operator's action, as the balancer made it: summary, each action with its
// explanation, vetoes marked, and the predicted CV.
export function renderPlan(body, parts) {
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

// Drain and Activate, previewed in the page's #state-dialog: returns open(broker, verb).
export function stateDialog(result, done) {
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
