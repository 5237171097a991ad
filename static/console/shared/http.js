// The console's API: JSON over fetch, with Django's CSRF token on a POST; a refusal is thrown
// as an Error saying why (and, for a form, the field at fault).

function csrf() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

export async function post(url, data) {
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

export async function get(url) {
  const response = await fetch(url, {credentials: "same-origin"});
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((body.error && body.error.message) || body.detail || response.statusText);
  return body;
}
