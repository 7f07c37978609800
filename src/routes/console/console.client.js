// The operator console's browser code: plain DOM, no framework, no other origin. Served by the
// Worker as text (routes/console/routes.ts) under a CSP of default-src 'self'. Everything shown
// comes from the admin API and goes into the page as text (textContent), never as HTML.

(() => {
  const TOKEN_KEY = "animal-store-admin-token";
  const API = "/admin/v1";
  const $ = (selector) => document.querySelector(selector);

  /** The admin token lives in this tab's sessionStorage only: never a URL, never a cookie. */
  const session = {
    get: () => sessionStorage.getItem(TOKEN_KEY),
    set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
    clear: () => sessionStorage.removeItem(TOKEN_KEY),
  };

  class ApiFailure extends Error {
    constructor(status, body) {
      super(body?.message ?? `HTTP ${status}`);
      this.status = status;
      this.code = body?.code ?? "unknown";
    }
  }

  /** Calls the admin API with the session's token; throws ApiFailure with the API's Error message. */
  async function api(method, path, body) {
    const headers = { Authorization: `Bearer ${session.get()}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      if (res.status === 401) logOut("The token was refused; log in again.");
      throw new ApiFailure(res.status, data);
    }
    return data;
  }

  function say(text, kind = "info") {
    const message = $("#message");
    message.textContent = text;
    message.className = kind;
  }

  /** Runs an action, showing its failure (the API's Error message) instead of throwing. */
  const guarded =
    (action) =>
    async (...args) => {
      try {
        await action(...args);
      } catch (err) {
        say(err instanceof ApiFailure ? `${err.message} (${err.code})` : String(err), "error");
      }
    };

  function el(tag, text, attributes = {}) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    return node;
  }

  const day = (iso) => (iso ? iso.slice(0, 10) : "—");

  // ------------------------------------------------------------------ log in and out
  function showApp(loggedIn) {
    $("#login").hidden = loggedIn;
    $("#app").hidden = !loggedIn;
    $("#logout").hidden = !loggedIn;
  }

  /**
   * Asks the API what the session's token may do and offers the write actions (elements marked
   * data-writes) only to a full-access token; until the answer, and for a read-only token, the
   * stylesheet hides them.
   */
  async function loadAccess() {
    const me = await api("GET", "/whoami");
    document.body.dataset.access = me.access;
  }

  function logOut(reason) {
    session.clear();
    delete document.body.dataset.access;
    showApp(false);
    $("#login-form").reset();
    if (reason) $("#login .hint").textContent = reason;
  }

  async function logIn(event) {
    event.preventDefault();
    const token = $("#token").value.trim();
    if (!token) return;
    session.set(token);
    $("#token").value = "";
    try {
      await loadAccess();
    } catch (err) {
      session.clear();
      $("#login .hint").textContent =
        err instanceof ApiFailure ? `Not accepted: ${err.message}` : String(err);
      return;
    }
    showApp(true);
    await Promise.all([loadKeys(), loadAudit()]);
  }

  // ------------------------------------------------------------------ keys
  let nextKeysCursor = null;

  function filterQuery() {
    const params = new URLSearchParams();
    for (const [name, value] of new FormData($("#filters")))
      if (String(value).trim()) params.set(name, String(value).trim());
    return params;
  }

  async function loadKeys(more = false) {
    const params = filterQuery();
    params.set("limit", "50");
    if (more && nextKeysCursor) params.set("cursor", nextKeysCursor);
    const page = await api("GET", `/keys?${params}`);
    const body = $("#key-table tbody");
    if (!more) body.replaceChildren();
    for (const key of page.data) {
      const row = el("tr", undefined, { "data-key-id": key.id });
      for (const cell of [
        key.name,
        key.id,
        key.plan,
        key.status,
        key.ownerId ?? "",
        day(key.createdAt),
      ])
        row.append(el("td", cell));
      row.addEventListener(
        "click",
        guarded(() => openKey(key.id)),
      );
      body.append(row);
    }
    nextKeysCursor = page.nextCursor;
    $("#more-keys").hidden = !page.nextCursor;
  }

  async function createKey(event) {
    event.preventDefault();
    const form = new FormData($("#create-form"));
    const body = { name: String(form.get("name")), plan: String(form.get("plan")) };
    const perMinute = String(form.get("perMinute") ?? "");
    const perDay = String(form.get("perDay") ?? "");
    if (perMinute || perDay) body.limits = { perMinute: Number(perMinute), perDay: Number(perDay) };
    const ownerId = String(form.get("ownerId") ?? "").trim();
    if (ownerId) body.ownerId = ownerId;
    const created = await api("POST", "/keys", body);
    showSecret(created.key);
    $("#create-form").reset();
    say(`Created ${created.name} (${created.id}).`);
    await Promise.all([loadKeys(), loadAudit()]);
    await openKey(created.id);
  }

  function showSecret(secret) {
    $("#secret-value").textContent = secret;
    $("#secret").hidden = false;
  }

  async function copySecret() {
    await navigator.clipboard.writeText($("#secret-value").textContent);
    say("The secret is on the clipboard.");
  }

  // ------------------------------------------------------------------ one key
  let current = null;

  async function openKey(id) {
    const [key, usage, audit] = await Promise.all([
      api("GET", `/keys/${id}`),
      api("GET", `/keys/${id}/usage`),
      api("GET", `/audit?keyId=${id}&limit=20`),
    ]);
    current = key;
    for (const row of document.querySelectorAll("#key-table tbody tr"))
      row.classList.toggle("selected", row.dataset.keyId === id);
    $("#detail").hidden = false;
    $("#detail").dataset.keyId = id;
    $("#detail-title").textContent = `${key.name} — ${key.status}`;
    const fields = $("#detail-fields");
    fields.replaceChildren();
    const shown = {
      Id: key.id,
      Prefix: key.prefix,
      Plan: `${key.plan} (${key.limits.perMinute}/min, ${key.limits.perDay}/day)`,
      State: key.status,
      Owner: key.ownerId ?? "—",
      Meta: key.meta ? JSON.stringify(key.meta) : "—",
      Created: key.createdAt,
      Expires: key.expiresAt ?? "never",
      "Last rolled": key.rolledAt ?? "never",
    };
    for (const [name, value] of Object.entries(shown))
      fields.append(el("dt", name), el("dd", value));
    $("#detail-now").textContent = key.usage
      ? `This minute: ${key.usage.minute.count} of ${key.usage.minute.limit}. Today: ${key.usage.day.count} of ${key.usage.day.limit}.` +
        (key.usage.bannedUntil ? ` Banned until ${key.usage.bannedUntil}.` : "")
      : "The key's quota object could not be reached.";
    $("#new-plan").value = key.plan;
    $("#toggle-enabled").textContent = key.status === "disabled" ? "Enable" : "Disable";
    drawUsage(usage.data);
    showAudit($("#detail-audit"), audit.data);
  }

  /** Bars per day: admitted (blue) with the refusals stacked on top (red). */
  function drawUsage(days) {
    const svg = $("#usage-chart");
    const SVG = "http://www.w3.org/2000/svg";
    svg.replaceChildren();
    const total = (d) =>
      d.admitted + d.refused.rate_limited + d.refused.quota_exceeded + d.refused.key_banned;
    const peak = Math.max(1, ...days.map(total));
    const width = 300 / days.length;
    days.forEach((d, i) => {
      const refused = total(d) - d.admitted;
      const admittedHeight = (d.admitted / peak) * 110;
      const refusedHeight = (refused / peak) * 110;
      for (const [cls, height, y, count] of [
        ["admitted", admittedHeight, 120 - admittedHeight, d.admitted],
        ["refused", refusedHeight, 120 - admittedHeight - refusedHeight, refused],
      ]) {
        const bar = document.createElementNS(SVG, "rect");
        bar.setAttribute("class", cls);
        bar.setAttribute("x", String(i * width + 0.5));
        bar.setAttribute("width", String(Math.max(0.5, width - 1)));
        bar.setAttribute("y", String(y));
        bar.setAttribute("height", String(height));
        bar.setAttribute("data-day", d.day);
        bar.setAttribute("data-count", String(count));
        const title = document.createElementNS(SVG, "title");
        title.textContent = `${d.day}: ${count} ${cls}`;
        bar.append(title);
        svg.append(bar);
      }
    });
    const today = days[days.length - 1];
    const sum = days.reduce((n, d) => n + d.admitted, 0);
    const refusedSum = days.reduce((n, d) => n + total(d) - d.admitted, 0);
    $("#usage-summary").textContent =
      `${days[0]?.day} to ${today?.day}: ${sum} admitted, ${refusedSum} refused. ` +
      `Today: ${today?.admitted ?? 0} admitted, ${today ? total(today) - today.admitted : 0} refused.`;
  }

  function describeChanges(changes) {
    return Object.entries(changes)
      .map(
        ([field, { before, after }]) =>
          `${field}: ${JSON.stringify(before)} → ${JSON.stringify(after)}`,
      )
      .join("; ");
  }

  function showAudit(list, entries) {
    list.replaceChildren();
    if (!entries.length) list.append(el("li", "No entries."));
    for (const e of entries) {
      const item = el("li", undefined, { "data-action": e.action, "data-key-id": e.keyId });
      item.append(
        el("time", e.at, { datetime: e.at }),
        document.createTextNode(` ${e.actor} ${e.action} ${e.keyId}`),
      );
      const details = describeChanges(e.changes);
      if (details) item.append(el("div", details, { class: "hint" }));
      list.append(item);
    }
  }

  async function loadAudit() {
    const page = await api("GET", "/audit?limit=50");
    showAudit($("#audit-list"), page.data);
  }

  // ------------------------------------------------------------------ actions on the open key
  async function act(action) {
    if (!current) return;
    const path = `/keys/${current.id}`;
    if (action === "plan") {
      const plan = $("#new-plan").value;
      if (plan === "enterprise" && current.plan !== "enterprise") {
        const perMinute = Number(prompt("Requests per minute for this enterprise key?"));
        const perDay = Number(prompt("Requests per day?"));
        await api("PATCH", path, { plan, limits: { perMinute, perDay } });
      } else {
        await api("PATCH", path, { plan });
      }
      say(`Plan of ${current.name} is now ${plan}.`);
    } else if (action === "toggle") {
      const enabled = current.status === "disabled";
      await api("PATCH", path, { enabled });
      say(`${current.name} is ${enabled ? "enabled" : "disabled"}.`);
    } else if (action === "roll") {
      const rolled = await api("POST", `${path}/roll`, {});
      showSecret(rolled.key);
      say(
        `New secret for ${current.name}; the old one works until ${rolled.previousSecretExpiresAt}.`,
      );
    } else if (action === "unban") {
      await api("POST", `${path}/unban`);
      say(`${current.name} is not banned.`);
    } else if (action === "revoke") {
      $("#revoke-name").textContent = current.name;
      $("#confirm-revoke").showModal();
      return; // continues in confirmRevoke once the operator answers
    }
    await Promise.all([loadKeys(), loadAudit(), openKey(current.id)]);
  }

  async function confirmRevoke() {
    if ($("#confirm-revoke").returnValue !== "revoke" || !current) return;
    await api("DELETE", `/keys/${current.id}`);
    say(`${current.name} is revoked.`);
    await Promise.all([loadKeys(), loadAudit(), openKey(current.id)]);
  }

  // ------------------------------------------------------------------ wiring
  document.addEventListener("DOMContentLoaded", () => {
    $("#login-form").addEventListener("submit", guarded(logIn));
    $("#logout").addEventListener("click", () => logOut());
    $("#filters").addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(loadKeys)();
    });
    $("#more-keys").addEventListener(
      "click",
      guarded(() => loadKeys(true)),
    );
    $("#create-form").addEventListener("submit", guarded(createKey));
    $("#copy-secret").addEventListener("click", guarded(copySecret));
    $("#load-audit").addEventListener("click", guarded(loadAudit));
    for (const button of document.querySelectorAll("#actions button"))
      button.addEventListener(
        "click",
        guarded(() => act(button.dataset.action)),
      );
    $("#confirm-revoke").addEventListener("close", guarded(confirmRevoke));
    if (session.get()) {
      showApp(true);
      guarded(() => Promise.all([loadAccess(), loadKeys(), loadAudit()]))();
    } else {
      showApp(false);
    }
  });
})();
