// Imported by templates/console/config.html, which calls config() with the page's data.

import {post} from "../shared/http.js";
import {cvText, el, utc} from "../shared/dom.js";
import {renderPlan} from "../shared/plans.js";
import {replayCompare} from "../shared/charts.js";

// The strategy config: a form from the registry, what-if against the current config, saves
// as versions, rollback.
export function config(state, entries, isOperator) {
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
    if (!state.versions.length) {
      const tr = el("tr");
      tr.appendChild(el("td", {colspan: "6", class: "muted"},
        "No saved version yet: the config above is as it was set up. Each save is kept here with what it changed, and can be rolled back to."));
      body.appendChild(tr);
    }
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
