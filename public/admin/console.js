// The operator console's browser code: plain DOM, no framework, no other origin. A static asset
// loaded by the page (src/routes/console/) under a CSP of default-src 'self'. Everything shown
// comes from the admin API and goes into the page as text (textContent), never as HTML. The usage
// chart is plain SVG drawn here: a few dozen elements, no library to ship or to allow in the CSP.
//
// Each view has a URL of its own (/admin/keys?plan=…, /admin/keys/{id}?days=…, /admin/keys/new,
// /admin/usage?day=…, /admin/audit?actor=…, /admin/webhooks?ownerId=…, /admin/webhooks/{id}): links and filters change the URL through the
// History API, and the view is drawn from the URL, so a view can be bookmarked, shared and
// reloaded, and Back goes back.

(() => {
  const TOKEN_KEY = "animal-store-admin-token";
  const API = "/admin/v1";
  const BASE = "/admin";
  const SVG = "http://www.w3.org/2000/svg";
  const KEYS_PAGE = 20;
  const KEY_AUDIT_ENTRIES = 6;
  const AUDIT_PAGE = 50;
  const HOOKS_PAGE = 50;
  const DELIVERIES_PAGE = 20;
  const $ = (selector, root = document) => root.querySelector(selector);
  const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

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

  /** Calls the admin API with the session's token; the raw Response of a success. */
  async function request(method, path, body, accept = "application/json") {
    const headers = { Authorization: `Bearer ${session.get()}`, Accept: accept };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
    if (!res.ok) {
      const data = await res.json().catch(() => null);
      if (res.status === 401) logOut("The token was refused; log in again.");
      throw new ApiFailure(res.status, data);
    }
    return res;
  }

  /** Calls the admin API; throws ApiFailure with the API's Error message. */
  async function api(method, path, body) {
    return (await request(method, path, body)).json();
  }

  const describeError = (err) =>
    err instanceof ApiFailure ? `${err.message} (${err.code})` : String(err?.message ?? err);

  function say(text, kind = "info") {
    const message = $("#message");
    message.textContent = text;
    message.className = kind;
  }

  /** Shows an action's result in its own output, next to the button that started it. */
  function report(output, text, kind = "ok") {
    output.textContent = text;
    output.className = `result ${kind}`;
  }

  /** Runs an action, showing its failure (the API's Error message) instead of throwing. */
  const guarded =
    (action, output) =>
    async (...args) => {
      try {
        await action(...args);
      } catch (err) {
        if (output) report(output, describeError(err), "error");
        else say(describeError(err), "error");
      }
    };

  function el(tag, text, attributes = {}) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    return node;
  }

  function svg(tag, attributes = {}, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  // ------------------------------------------------------------------ formatting
  const integer = new Intl.NumberFormat();
  const compact = new Intl.NumberFormat(undefined, {
    notation: "compact",
    maximumFractionDigits: 1,
  });
  const fmt = (n) => integer.format(n);
  const localDateTime = new Intl.DateTimeFormat(undefined, {
    dateStyle: "medium",
    timeStyle: "short",
  });
  const shortUtcDay = new Intl.DateTimeFormat(undefined, {
    month: "short",
    day: "numeric",
    timeZone: "UTC",
  });
  const utcText = (iso) => `${iso.slice(0, 19).replace("T", " ")} UTC`;
  const todayUtc = () => new Date().toISOString().slice(0, 10);
  /** "HH:MM" (UTC) of a time: the days are UTC days, so "so far" is told in UTC too. */
  const clockTime = (at) => new Date(at).toISOString().slice(11, 16);

  /** A time in the reader's own time zone, with the UTC time on hover. */
  function timeEl(iso) {
    if (!iso) return el("span", "—");
    return el("time", localDateTime.format(new Date(iso)), { datetime: iso, title: utcText(iso) });
  }

  const totalOf = (d) =>
    d.admitted + d.refused.rate_limited + d.refused.quota_exceeded + d.refused.key_banned;

  function badge(text, kind = text) {
    return el("span", text, { class: `badge ${kind}` });
  }

  // ------------------------------------------------------------------ views and their URLs
  const KEY_PATH = /^\/admin\/keys\/(key_[0-9A-Za-z]{20})$/;
  const HOOK_PATH = /^\/admin\/webhooks\/(whe_[0-9A-Za-z]{20})$/;
  // A search that starts like a secret: kept out of the URL (and so out of the history).
  const SECRET_START = /^pet_(live|test)_/;
  let secretSearch = "";

  /** The view a URL names, with its id and query. */
  function routeOf(url) {
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const query = url.searchParams;
    if (path === BASE || path === `${BASE}/keys`) return { view: "keys", query };
    if (path === `${BASE}/keys/new`) return { view: "new", query };
    const key = KEY_PATH.exec(path);
    if (key) return { view: "key", id: key[1], query };
    if (path === `${BASE}/usage`) return { view: "usage", query };
    if (path === `${BASE}/audit`) return { view: "audit", query };
    if (path === `${BASE}/webhooks`) return { view: "hooks", query };
    if (path === `${BASE}/webhooks/new`) return { view: "hook-new", query };
    const hook = HOOK_PATH.exec(path);
    if (hook) return { view: "hook", id: hook[1], query };
    return { view: "missing", query };
  }

  /** A console URL with `params` (empty values left out) as its query string. */
  function urlOf(path, params = {}) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params))
      if (value !== undefined && value !== null && String(value).trim())
        query.set(name, String(value).trim());
    const text = query.toString();
    return text ? `${path}?${text}` : path;
  }

  /** Goes to `url` in the console (a new history entry, or replacing this one) and draws it. */
  async function navigate(url, { replace = false } = {}) {
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    await render();
  }

  const VIEW_TITLES = {
    keys: "Keys",
    new: "New key",
    key: "Key",
    usage: "Usage",
    audit: "Audit trail",
    hooks: "Webhooks",
    "hook-new": "New endpoint",
    hook: "Endpoint",
    missing: "Not found",
  };
  const NAV_OF = {
    keys: "keys",
    new: "keys",
    key: "keys",
    usage: "usage",
    audit: "audit",
    hooks: "webhooks",
    "hook-new": "webhooks",
    hook: "webhooks",
  };

  /** Shows the view the URL names, and loads what it shows. */
  async function render() {
    if (!session.get()) return showApp(false);
    showApp(true);
    const route = routeOf(new URL(location.href));
    for (const section of $$("#app > [data-view]"))
      section.hidden = section.dataset.view !== route.view;
    for (const link of $$("#nav a")) {
      if (link.dataset.nav === NAV_OF[route.view]) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    document.title = `${VIEW_TITLES[route.view]} — Animal Store console`;
    say("");
    if (route.view !== "keys" && route.view !== "key") secretSearch = "";
    // Busy until the view has drawn what it loads (tests and assistive technology wait on it).
    const app = $("#app");
    app.setAttribute("aria-busy", "true");
    document.body.dataset.view = route.view;
    const views = {
      keys: () => showKeys(route.query),
      new: () => showNewKey(),
      key: () => openKey(route.id, route.query),
      usage: () => showDay(route.query),
      audit: () => showAuditView(route.query),
      hooks: () => showHooks(route.query),
      "hook-new": async () => report($("#hook-form .result"), "", ""),
      hook: () => openHook(route.id),
      missing: async () => {},
    };
    try {
      await guarded(views[route.view])();
    } finally {
      app.removeAttribute("aria-busy");
    }
  }

  /** Console links move within the page (a plain click); others, and modified clicks, do not. */
  function followLink(event) {
    const link = event.target.closest?.("a[href]");
    if (!link || link.target || link.hasAttribute("download")) return;
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey)
      return;
    const url = new URL(link.href);
    if (url.origin !== location.origin || routeOf(url).view === "missing") return;
    event.preventDefault();
    if (link.closest("#nav")) secretSearch = "";
    guarded(() => navigate(url.pathname + url.search))();
  }

  // ------------------------------------------------------------------ log in and out
  function showApp(loggedIn) {
    $("#login").hidden = loggedIn;
    $("#app").hidden = !loggedIn;
    $("#nav").hidden = !loggedIn;
    $("#session").hidden = !loggedIn;
  }

  /**
   * Asks the API what the session's token may do and offers the write actions (elements marked
   * data-writes) only to a full-access token; until the answer, and for a read-only token, the
   * stylesheet hides them.
   */
  async function loadAccess() {
    const me = await api("GET", "/whoami");
    document.body.dataset.access = me.access;
    const who = $("#whoami");
    who.replaceChildren(el("span", me.name));
    if (me.access === "read") who.append(" ", badge("read-only", "read"));
  }

  function logOut(reason) {
    session.clear();
    delete document.body.dataset.access;
    $("#whoami").replaceChildren();
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
    await render();
  }

  // ------------------------------------------------------------------ keys
  let nextKeysCursor = null;
  let keysQuery = new URLSearchParams();
  let keysShown = 0;

  /** The form's fields with a value, trimmed. */
  function formValues(form) {
    const values = {};
    for (const [name, value] of new FormData(form))
      if (String(value).trim()) values[name] = String(value).trim();
    return values;
  }

  /** Sets each field of `form` that `query` names (others are emptied). */
  function fillForm(form, query) {
    for (const field of form.elements) {
      if (!field.name || field.type === "submit" || field.type === "button") continue;
      field.value = query.get(field.name) ?? "";
    }
  }

  /** A table cell that names its column (the narrow layout shows it as a label). */
  function cell(label, content, attributes = {}) {
    const td = el("td", undefined, { "data-label": label, ...attributes });
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    return td;
  }

  function stateCell(key) {
    const wrap = el("span");
    wrap.append(badge(key.status));
    if (key.activity?.bannedUntil) {
      wrap.append(" ", badge("banned"));
      wrap.title = `Banned until ${localDateTime.format(new Date(key.activity.bannedUntil))} (${utcText(key.activity.bannedUntil)})`;
    }
    return wrap;
  }

  function todayCell(activity) {
    if (!activity) return el("span", "unavailable", { class: "hint" });
    const { used, limit } = activity.today;
    const wrap = el("span", undefined, { class: "today" });
    const share = limit > 0 ? used / limit : 0;
    const meter = el("meter", undefined, {
      min: "0",
      max: String(limit),
      value: String(used),
      low: String(limit * 0.5),
      high: String(limit * 0.8),
      optimum: "0",
    });
    wrap.append(
      meter,
      el(
        "span",
        `${fmt(used)} / ${compact.format(limit)} (${(share * 100).toFixed(share > 0 && share < 0.01 ? 2 : 0)}%)`,
      ),
    );
    return wrap;
  }

  /** The key list as the URL's query filters it (a secret's start, kept out of the URL, too). */
  async function showKeys(query) {
    keysQuery = new URLSearchParams(query);
    keysQuery.delete("cursor");
    if (secretSearch && !keysQuery.has("q")) keysQuery.set("q", secretSearch);
    fillForm($("#filters"), keysQuery);
    await loadKeys();
  }

  async function loadKeys(more = false) {
    const params = new URLSearchParams(keysQuery);
    params.set("limit", String(KEYS_PAGE));
    if (more && nextKeysCursor) params.set("cursor", nextKeysCursor);
    const page = await api("GET", `/keys?${params}`);
    const readAt = Date.now();
    const body = $("#key-table tbody");
    if (!more) {
      body.replaceChildren();
      keysShown = 0;
    }
    for (const key of page.data) {
      const href = `${BASE}/keys/${key.id}`;
      const row = el("tr", undefined, { "data-key-id": key.id });
      const name = el("span", undefined, { class: "name" });
      name.append(el("a", key.name, { href }), el("small", key.id));
      row.append(
        cell("Name", name),
        cell("Plan", key.plan),
        cell("State", stateCell(key)),
        cell("Today", todayCell(key.activity)),
        cell("Last used", key.activity ? (key.activity.lastUsedDay ?? "never") : "—"),
        cell("Owner", key.ownerId ?? "—"),
      );
      // The whole row opens the key (the name is the link, for the keyboard and new tabs).
      row.addEventListener("click", (event) => {
        if (event.target.closest("a")) return;
        guarded(() => navigate(href))();
      });
      body.append(row);
    }
    keysShown += page.data.length;
    const filtered = [...keysQuery.keys()].length > 0;
    const none = keysShown === 0;
    $("#key-table").hidden = none;
    $("#no-keys").hidden = !(none && filtered);
    $("#first-key").hidden = !(none && !filtered);
    $("#clear-filters").hidden = !filtered;
    $("#keys-foot").hidden = none;
    nextKeysCursor = page.nextCursor;
    $("#more-keys").hidden = !page.nextCursor;
    $("#keys-count").textContent =
      `${fmt(keysShown)} ${keysShown === 1 ? "key" : "keys"}${page.nextCursor ? ", more to show" : ""}`;
    $("#keys-as-of").textContent =
      `Today: requests counted so far today (UTC), as of ${clockTime(readAt)} UTC, live from each key's quota object.`;
  }

  async function filterKeys(event) {
    event.preventDefault();
    const values = formValues($("#filters"));
    // The start of a secret is searched for, but never written into the URL or the history; and
    // only its shown prefix is sent (all the API matches): the request's URL is logged.
    const shown = Number($("#filters input[name=q]").dataset.shownPrefix);
    secretSearch = values.q && SECRET_START.test(values.q) ? values.q.slice(0, shown) : "";
    if (secretSearch) delete values.q;
    await navigate(urlOf(`${BASE}/keys`, values));
  }

  // ------------------------------------------------------------------ a new key
  /** A secret just issued by "create", shown on the key's page once. */
  let issuedSecret = null;

  function showNewKey() {
    const form = $("#create-form");
    report($(".result", form), "", "");
    form.classList.toggle("enterprise", form.elements.plan.value === "enterprise");
  }

  async function createKey(event) {
    event.preventDefault();
    const formEl = $("#create-form");
    const form = new FormData(formEl);
    const body = { name: String(form.get("name")), plan: String(form.get("plan")) };
    const perMinute = String(form.get("perMinute") ?? "");
    const perDay = String(form.get("perDay") ?? "");
    if (body.plan === "enterprise" || perMinute || perDay)
      body.limits = { perMinute: Number(perMinute), perDay: Number(perDay) };
    const ownerId = String(form.get("ownerId") ?? "").trim();
    if (ownerId) body.ownerId = ownerId;
    const region = String(form.get("region") ?? "");
    if (region) body.region = region;
    const created = await api("POST", "/keys", body);
    formEl.reset();
    formEl.classList.remove("enterprise");
    issuedSecret = { id: created.id, key: created.key };
    await navigate(`${BASE}/keys/${created.id}`);
  }

  function showSecret(box, secret) {
    $(".secret-value", box).textContent = secret;
    $(".copy-secret", box).textContent = "Copy";
    box.hidden = false;
  }

  async function copySecret(button) {
    const box = button.closest(".secret");
    await navigator.clipboard.writeText($(".secret-value", box).textContent);
    button.textContent = "Copied";
  }

  // ------------------------------------------------------------------ one key
  let current = null;
  let usageDays = [];
  let usageReadAt = Date.now();

  /** "2030-06-10T12:00" in the reader's time zone, for a datetime-local input. */
  function localInputValue(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    const pad = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  function fillActionForms(key) {
    const form = (action) => $(`#actions form[data-action="${action}"]`);
    form("rename").elements.name.value = key.name;
    form("owner").elements.ownerId.value = key.ownerId ?? "";
    form("meta").elements.meta.value = key.meta ? JSON.stringify(key.meta, null, 2) : "";
    const plan = form("plan");
    plan.elements.plan.value = key.plan;
    plan.elements.perMinute.value = String(key.limits.perMinute);
    plan.elements.perDay.value = String(key.limits.perDay);
    plan.classList.toggle("enterprise", key.plan === "enterprise");
    form("region").elements.region.value = key.region ?? "";
    form("expiry").elements.expiresAt.value = localInputValue(key.expiresAt);
    $("#toggle-enabled").textContent = key.status === "disabled" ? "Enable" : "Disable…";
    $("#actions [data-unban]").hidden = !key.usage?.bannedUntil;
  }

  function clearResults() {
    for (const output of $$("#actions output.result")) report(output, "", "");
    for (const box of $$("#detail .secret")) box.hidden = true;
  }

  let lastOpen = 0;

  /**
   * Shows key `id`. The detail is aria-busy until the last open asked for is drawn; an earlier
   * open that answers later is dropped, so a slow answer never redraws an older state over a
   * newer one, or over what the operator has typed into the action forms since.
   */
  async function openKey(id, query = new URLSearchParams(location.search)) {
    const open = ++lastOpen;
    const detail = $("#detail");
    detail.setAttribute("aria-busy", "true");
    const days = ["7", "30", "90"].includes(query.get("days")) ? query.get("days") : "30";
    $(`#usage-range input[value="${days}"]`).checked = true;
    try {
      await drawKey(id, () => open === lastOpen);
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 404 && open === lastOpen) {
        for (const section of $$("#app > [data-view]"))
          section.hidden = section.dataset.view !== "missing";
        $("#missing-text").textContent = `No key has the id ${id}.`;
        return;
      }
      throw err;
    } finally {
      if (open === lastOpen) detail.removeAttribute("aria-busy");
    }
  }

  /** One of the key page's figures: a name, a value and what it is measured against. */
  function stat(name, value, detail) {
    const box = el("div", undefined, { class: "card stat" });
    const dd = el("dd", undefined);
    if (value instanceof Node) dd.append(value);
    else dd.textContent = value;
    if (detail) dd.append(" ", el("small", detail));
    box.append(el("dt", name), dd);
    return box;
  }

  async function drawKey(id, isLatest) {
    const [key, audit] = await Promise.all([
      api("GET", `/keys/${id}`),
      api("GET", `/audit?keyId=${id}&limit=${KEY_AUDIT_ENTRIES}`),
    ]);
    if (!isLatest()) return;
    const readAt = Date.now();
    if (current?.id !== id) clearResults();
    current = key;
    const detail = $("#detail");
    detail.dataset.keyId = id;
    detail.dataset.status = key.status;
    document.title = `${key.name} — Animal Store console`;
    $("#crumb-key").textContent = key.name;
    $("#detail-title").textContent = key.name;
    const badges = $("#detail-badges");
    badges.replaceChildren(badge(key.status), badge(key.plan, "plan"));
    if (key.usage?.bannedUntil) badges.append(badge("banned"));
    const sub = $("#detail-sub");
    sub.replaceChildren(
      el("code", key.id),
      el("span", `secret ${key.prefix}…`),
      el("span", `${fmt(key.limits.perMinute)}/min · ${fmt(key.limits.perDay)}/day`),
    );
    if (issuedSecret?.id === id) {
      showSecret($("#create-secret"), issuedSecret.key);
      issuedSecret = null;
    }

    const fields = $("#detail-fields");
    fields.replaceChildren();
    const shown = [
      ["Id", key.id],
      ["Secret starts with", key.prefix],
      ["Plan", `${key.plan} (${fmt(key.limits.perMinute)}/min, ${fmt(key.limits.perDay)}/day)`],
      ["State", key.status],
      ["Owner", key.ownerId ?? "—"],
      ["Metadata", key.meta ? JSON.stringify(key.meta) : "—"],
      ["Region", key.region ?? "near its first request"],
      ["Created", timeEl(key.createdAt)],
      ["Expires", key.expiresAt ? timeEl(key.expiresAt) : "never"],
      ["Last rolled", key.rolledAt ? timeEl(key.rolledAt) : "never"],
    ];
    if (key.previousSecretExpiresAt)
      shown.push(["Old secret works until", timeEl(key.previousSecretExpiresAt)]);
    for (const [name, value] of shown) {
      const dd = el("dd", undefined, name === "Metadata" ? { class: "long" } : {});
      if (value instanceof Node) dd.append(value);
      else dd.textContent = value;
      fields.append(el("dt", name), dd);
    }

    // Live from the key's quota object as of the read: the minute and the day so far.
    const now = $("#detail-now");
    now.replaceChildren();
    now.dataset.asOf = new Date(readAt).toISOString();
    if (key.usage) {
      const { minute, day, bannedUntil } = key.usage;
      now.append(
        stat("This minute", fmt(minute.count), `of ${fmt(minute.limit)}`),
        stat(
          `Today so far, as of ${clockTime(readAt)} UTC`,
          fmt(day.count),
          `of ${fmt(day.limit)}`,
        ),
        bannedUntil ? stat("Banned until", timeEl(bannedUntil)) : stat("Ban", "none"),
      );
    } else {
      now.append(stat("Now", "unavailable", "the key's quota object could not be reached"));
    }
    const revoked = key.status === "revoked";
    $("#actions").hidden = revoked;
    $("#no-actions").hidden = !revoked;
    fillActionForms(key);
    showAudit($("#detail-audit"), audit.data, "No changes recorded for this key yet.");
    $("#detail-audit-all").href = urlOf(`${BASE}/audit`, { keyId: id });
    await loadUsage();
  }

  function rangeDays() {
    return Number($("#usage-range").elements.days.value || 30);
  }

  /**
   * The key page's `days` up to today. Only `from` is sent: the server ends the range at its own
   * today, so a browser whose clock is ahead of the server's UTC date (which the API refuses as a
   * day to come) still gets its chart; `to` names the file of a download.
   */
  function rangeOf(days) {
    const to = todayUtc();
    const from = new Date(Date.parse(`${to}T00:00:00Z`) - (days - 1) * 86_400_000)
      .toISOString()
      .slice(0, 10);
    return { from, to };
  }

  async function loadUsage() {
    if (!current) return;
    const days = rangeDays();
    const { from } = rangeOf(days);
    const usage = await api("GET", `/keys/${current.id}/usage?from=${from}`);
    usageReadAt = Date.now();
    usageDays = usage.data;
    $("#usage-heading").textContent = `Usage, last ${days} days`;
    drawUsage();
    fillUsageTable(usageDays);
  }

  /** A new range: in the URL (replacing this entry, so Back leaves the key), then drawn. */
  async function changeRange() {
    if (!current) return;
    const days = rangeDays();
    history.replaceState(
      null,
      "",
      urlOf(`${BASE}/keys/${current.id}`, days === 30 ? {} : { days }),
    );
    await loadUsage();
  }

  /** A round axis maximum at or above `peak`, and its step (4 or 5 gridlines). */
  function niceScale(peak) {
    if (peak <= 0) return { max: 4, step: 1 };
    const rough = peak / 4;
    const magnitude = 10 ** Math.floor(Math.log10(rough));
    // Requests are whole: never a step below 1.
    const step = Math.max(
      1,
      [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? 10 * magnitude,
    );
    return { max: Math.ceil(peak / step) * step, step };
  }

  /**
   * Bars per UTC day, admitted with the refusals stacked on top, on axes sized to the chart's
   * real width (so text keeps its size on a phone): dates below, a scale on the left, today
   * marked. Every bar with requests is at least 2 px tall, so a small today stays visible.
   */
  function drawUsage() {
    const chart = $("#usage-chart");
    const days = usageDays;
    const width = Math.max(280, Math.round(chart.getBoundingClientRect().width || 640));
    const height = 220;
    const margin = { left: 52, right: 10, top: 22, bottom: 40 };
    const plotW = width - margin.left - margin.right;
    const plotH = height - margin.top - margin.bottom;
    chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
    chart.replaceChildren();
    const peak = Math.max(0, ...days.map(totalOf));
    const { max, step } = niceScale(peak);
    const y = (v) => margin.top + plotH - (v / max) * plotH;
    const baseline = y(0);

    const yAxis = svg("g", { class: "y-axis" });
    for (let v = 0; v <= max + step / 2; v += step) {
      yAxis.append(
        svg("line", {
          x1: margin.left,
          x2: width - margin.right,
          y1: y(v),
          y2: y(v),
          class: "grid",
        }),
        svg(
          "text",
          { x: margin.left - 6, y: y(v) + 4, "text-anchor": "end", "data-value": v },
          compact.format(v),
        ),
      );
    }
    yAxis.append(svg("text", { x: 4, y: 12, class: "axis-title" }, "requests per day"));
    chart.append(yAxis);

    const band = plotW / Math.max(1, days.length);
    const barWidth = Math.max(1, band * 0.75);
    const bars = svg("g", { class: "bars" });
    const today = todayUtc();
    days.forEach((d, i) => {
      const x = margin.left + i * band;
      const refused = totalOf(d) - d.admitted;
      const group = svg("g", {
        class: d.day === today ? "day today" : "day",
        "data-day": d.day,
        "data-admitted": d.admitted,
        "data-refused": refused,
      });
      if (d.day === today)
        group.append(
          svg("rect", { class: "today-band", x, y: margin.top, width: band, height: plotH }),
        );
      let top = baseline;
      for (const [cls, count] of [
        ["admitted", d.admitted],
        ["refused", refused],
      ]) {
        if (count <= 0) continue;
        const h = Math.max(2, (count / max) * plotH);
        top -= h;
        group.append(
          svg("rect", {
            class: cls,
            x: x + (band - barWidth) / 2,
            y: top,
            width: barWidth,
            height: h,
          }),
        );
      }
      group.append(
        svg(
          "title",
          {},
          `${d.day}: ${fmt(d.admitted)} admitted, ${fmt(refused)} refused` +
            (refused
              ? ` (${fmt(d.refused.rate_limited)} rate limited, ${fmt(d.refused.quota_exceeded)} over quota, ${fmt(d.refused.key_banned)} banned)`
              : ""),
        ),
      );
      // An invisible full-height target, so a day's numbers show on hover even without a bar.
      group.append(svg("rect", { class: "hover", x, y: margin.top, width: band, height: plotH }));
      bars.append(group);
    });
    chart.append(bars);

    const xAxis = svg("g", { class: "x-axis" });
    xAxis.append(
      svg("line", {
        x1: margin.left,
        x2: width - margin.right,
        y1: baseline,
        y2: baseline,
        class: "axis",
      }),
    );
    const fits = Math.max(2, Math.floor(plotW / 60));
    const every = Math.max(1, Math.ceil(days.length / fits));
    days.forEach((d, i) => {
      const isLast = i === days.length - 1;
      // Labels count back from the last day, which is always labelled.
      if (!isLast && (days.length - 1 - i) % every !== 0) return;
      if (!isLast && days.length - 1 - i < every) return;
      const cx = margin.left + i * band + band / 2;
      xAxis.append(
        svg("line", { x1: cx, x2: cx, y1: baseline, y2: baseline + 4, class: "tick" }),
        svg(
          "text",
          {
            x: cx,
            y: baseline + 18,
            "text-anchor": isLast ? "end" : "middle",
            "data-day": d.day,
          },
          shortUtcDay.format(new Date(`${d.day}T00:00:00Z`)),
        ),
      );
      if (isLast && d.day === today)
        xAxis.append(
          svg(
            "text",
            { x: cx, y: baseline + 33, "text-anchor": "end", class: "today-label" },
            "today",
          ),
        );
    });
    chart.append(xAxis);

    const admitted = days.reduce((n, d) => n + d.admitted, 0);
    const refused = days.reduce((n, d) => n + totalOf(d) - d.admitted, 0);
    const figure = $("#usage-figure");
    figure.classList.toggle("empty", peak === 0);
    if (peak === 0)
      chart.append(
        svg(
          "text",
          {
            x: margin.left + plotW / 2,
            y: margin.top + plotH / 2,
            "text-anchor": "middle",
            class: "empty-text",
          },
          "No usage yet",
        ),
      );
    const last = days[days.length - 1];
    $("#usage-summary").textContent =
      peak === 0
        ? `No usage yet: no requests from ${days[0]?.day} to ${last?.day} (UTC).`
        : `${days[0]?.day} to ${last?.day} (UTC): ${fmt(admitted)} admitted, ${fmt(refused)} refused. ` +
          `Today so far (as of ${clockTime(usageReadAt)} UTC): ${fmt(last?.admitted ?? 0)} admitted, ${fmt(last ? totalOf(last) - last.admitted : 0)} refused.`;
  }

  function fillUsageTable(days) {
    const body = $("#usage-table tbody");
    body.replaceChildren();
    for (const d of [...days].reverse()) {
      const row = el("tr", undefined, { "data-day": d.day });
      const number = (n) => el("td", fmt(n), { class: "number" });
      row.append(
        el("th", d.day, { scope: "row" }),
        number(d.admitted),
        number(d.refused.rate_limited),
        number(d.refused.quota_exceeded),
        number(d.refused.key_banned),
        number(d.stranded),
      );
      body.append(row);
    }
  }

  // ------------------------------------------------------------------ CSV downloads
  /** Saves `text` as a file through a link to a local blob (nothing leaves the page). */
  function saveFile(text, filename) {
    const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }));
    const link = el("a", undefined, { href: url, download: filename, hidden: "" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  /** Every page of a CSV answer, joined under one header row (pages follow Next-Cursor). */
  async function fetchCsv(path) {
    let text = "";
    let cursor = null;
    let asOf = null;
    do {
      const separator = path.includes("?") ? "&" : "?";
      const res = await request(
        "GET",
        cursor ? `${path}${separator}cursor=${encodeURIComponent(cursor)}` : path,
        undefined,
        "text/csv",
      );
      const page = await res.text();
      text += text ? page.slice(page.indexOf("\r\n") + 2) : page;
      cursor = res.headers.get("Next-Cursor");
      asOf ??= res.headers.get("Usage-As-Of");
    } while (cursor);
    return { text, asOf };
  }

  const rowsOf = (csv) => csv.split("\r\n").filter(Boolean).length - 1;

  async function downloadKeyCsv() {
    if (!current) return;
    const { from, to } = rangeOf(rangeDays());
    const { text } = await fetchCsv(`/keys/${current.id}/usage?from=${from}`);
    const filename = `${current.id}-usage-${from}-to-${to}.csv`;
    saveFile(text, filename);
    say(`Downloaded ${filename} (${rowsOf(text)} days; today's numbers are so far).`);
  }

  // ------------------------------------------------------------------ usage of one day
  /** Every key's totals of the URL's day (today by default), with the day's total at the foot. */
  async function showDay(query) {
    const form = $("#day-form");
    const day = /^\d{4}-\d{2}-\d{2}$/.test(query.get("day") ?? "") ? query.get("day") : todayUtc();
    form.elements.day.value = day;
    report($(".result", form), "", "");
    const rows = [];
    let cursor = null;
    let asOf = null;
    do {
      const page = await api(
        "GET",
        `/usage?day=${day}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      rows.push(...page.data);
      asOf ??= page.asOf;
      cursor = page.nextCursor;
    } while (cursor);
    const body = $("#day-table tbody");
    body.replaceChildren();
    for (const r of rows) {
      const row = el("tr", undefined, { "data-key-id": r.keyId });
      const name = el("span", undefined, { class: "name" });
      name.append(el("a", r.name, { href: `${BASE}/keys/${r.keyId}` }), el("small", r.keyId));
      row.append(
        cell("Key", name),
        cell("Plan", r.plan),
        cell("Owner", r.ownerId ?? "—"),
        cell("Admitted", fmt(r.admitted), { class: "number" }),
        cell("Refused", fmt(totalOf(r) - r.admitted), { class: "number" }),
        cell("Stranded", fmt(r.stranded), { class: "number" }),
      );
      body.append(row);
    }
    const sum = (f) => rows.reduce((n, r) => n + f(r), 0);
    const admitted = sum((r) => r.admitted);
    const foot = $("#day-table tfoot");
    const total = el("tr");
    total.append(
      el("th", `Total, ${fmt(rows.length)} ${rows.length === 1 ? "key" : "keys"}`, {
        scope: "row",
        colspan: "3",
      }),
      cell("Admitted", fmt(admitted), { class: "number" }),
      cell("Refused", fmt(sum((r) => totalOf(r) - r.admitted)), { class: "number" }),
      cell("Stranded", fmt(sum((r) => r.stranded)), { class: "number" }),
    );
    foot.replaceChildren(total);
    $("#day-table").hidden = rows.length === 0;
    $("#no-day-usage").hidden = rows.length > 0;
    const summary = $("#day-summary");
    summary.dataset.asOf = asOf ?? "";
    summary.replaceChildren();
    if (asOf)
      summary.append(
        el("span", `${day} so far, as of ${clockTime(asOf)} UTC`, { class: "so-far" }),
        `: the day is not over, so these totals still grow (read live from each key's quota object). ${fmt(admitted)} admitted.`,
      );
    else summary.append(`${day} (UTC), final: ${fmt(admitted)} admitted.`);
  }

  async function chooseDay(event) {
    event.preventDefault();
    const day = $("#day-form").elements.day.value;
    if (!day) throw new Error("Choose a day first.");
    await navigate(urlOf(`${BASE}/usage`, { day }));
  }

  async function downloadDayCsv() {
    const form = $("#day-form");
    const day = form.elements.day.value;
    if (!day) throw new Error("Choose a day first.");
    const { text, asOf } = await fetchCsv(`/usage?day=${day}&limit=100`);
    // An unfinished day's file says so in its name: it is not the day's invoice yet.
    const filename = asOf ? `usage-${day}-so-far.csv` : `usage-${day}.csv`;
    saveFile(text, filename);
    report(
      $(".result", form),
      `Downloaded ${filename} (${fmt(rowsOf(text))} keys${asOf ? `, so far, as of ${clockTime(asOf)} UTC` : ""}).`,
    );
  }

  // ------------------------------------------------------------------ audit
  const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

  /** A changed value as a reader wants it: times local (UTC on hover), limits in words. */
  function valueEl(value) {
    if (value === null || value === undefined) return el("span", "—");
    if (typeof value === "string" && ISO_TIME.test(value)) return timeEl(value);
    if (typeof value === "string") return el("span", value);
    // A list of names (an endpoint's event types) as a reader writes it.
    if (Array.isArray(value) && value.every((v) => typeof v === "string"))
      return el("span", value.join(", "));
    if (value && typeof value.perMinute === "number" && typeof value.perDay === "number")
      return el("span", `${fmt(value.perMinute)}/min, ${fmt(value.perDay)}/day`);
    return el("span", JSON.stringify(value));
  }

  /** The changed fields, before → after (a new key's fields: only as created). */
  function diffList(changes, created) {
    const list = el("dl", undefined, { class: "diff" });
    for (const [field, { before, after }] of Object.entries(changes)) {
      const dd = el("dd");
      const now = el("span", undefined, { class: "after" });
      now.append(valueEl(after));
      if (created) {
        dd.append(now);
        list.append(el("dt", field), dd);
        continue;
      }
      const was = el("span", undefined, { class: "before" });
      was.append(valueEl(before));
      dd.append(was, el("span", " → ", { class: "arrow" }), now);
      list.append(el("dt", field), dd);
    }
    return list;
  }

  function auditItem(e) {
    const item = el("li", undefined, {
      "data-action": e.action,
      "data-key-id": e.keyId,
      "data-actor": e.actor,
    });
    const head = el("div", undefined, { class: "entry-head" });
    head.append(
      timeEl(e.at),
      el("span", e.actor, { class: e.actor === "system" ? "actor system" : "actor" }),
      el("span", e.action, { class: `action ${e.action}` }),
      // An endpoint's entries (webhook_…) name the endpoint where a key's name the key.
      el("a", e.keyId, {
        href: `${BASE}/${e.keyId.startsWith("whe_") ? "webhooks" : "keys"}/${e.keyId}`,
        class: "mono",
      }),
    );
    item.append(head);
    const created = e.action === "create" || e.action === "webhook_create";
    if (Object.keys(e.changes).length) item.append(diffList(e.changes, created));
    return item;
  }

  function showAudit(list, entries, emptyText) {
    list.replaceChildren(...entries.map(auditItem));
    if (!entries.length && emptyText) list.append(el("li", emptyText, { class: "hint" }));
  }

  let auditQuery = new URLSearchParams();
  let nextAuditCursor = null;
  let auditShown = 0;

  async function showAuditView(query) {
    auditQuery = new URLSearchParams(query);
    auditQuery.delete("cursor");
    fillForm($("#audit-filters"), auditQuery);
    await loadAudit();
  }

  async function loadAudit(more = false) {
    const params = new URLSearchParams(auditQuery);
    params.set("limit", String(AUDIT_PAGE));
    if (more && nextAuditCursor) params.set("cursor", nextAuditCursor);
    const page = await api("GET", `/audit?${params}`);
    const list = $("#audit-list");
    if (!more) {
      list.replaceChildren();
      auditShown = 0;
    }
    list.append(...page.data.map(auditItem));
    auditShown += page.data.length;
    const none = auditShown === 0;
    list.hidden = none;
    $("#no-audit").hidden = !none;
    $("#clear-audit-filters").hidden = [...auditQuery.keys()].length === 0;
    $("#audit-foot").hidden = none;
    nextAuditCursor = page.nextCursor;
    $("#more-audit").hidden = !page.nextCursor;
    $("#audit-count").textContent =
      `${fmt(auditShown)} ${auditShown === 1 ? "entry" : "entries"}${page.nextCursor ? ", more to show" : ""}`;
  }

  async function filterAudit(event) {
    event.preventDefault();
    await navigate(urlOf(`${BASE}/audit`, formValues($("#audit-filters"))));
  }

  // ------------------------------------------------------------------ actions on the open key
  /** Asks before a drastic action; resolves true when the operator confirms. */
  function confirmed(text, label) {
    const dialog = $("#confirm");
    $("#confirm-text").textContent = text;
    $("#confirm-button").textContent = label;
    dialog.returnValue = "";
    dialog.showModal();
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), {
        once: true,
      });
    });
  }

  /** Shows the key as the action left it (its fields, figures, usage and audit trail). */
  async function refreshAfter() {
    await openKey(current.id);
  }

  /** The body of a PATCH from an action form, or throws with what is wrong in it. */
  function patchOf(action, form) {
    const v = (name) => String(form.elements[name].value).trim();
    if (action === "rename") return { name: v("name") };
    if (action === "owner") return { ownerId: v("ownerId") || null };
    if (action === "meta") {
      if (!v("meta")) return { meta: null };
      let meta;
      try {
        meta = JSON.parse(v("meta"));
      } catch {
        throw new Error('Metadata must be JSON, e.g. {"team": "billing"}.');
      }
      if (!meta || typeof meta !== "object" || Array.isArray(meta))
        throw new Error("Metadata must be a JSON object.");
      return { meta };
    }
    if (action === "plan") {
      const plan = v("plan");
      if (plan !== "enterprise") return { plan };
      return { plan, limits: { perMinute: Number(v("perMinute")), perDay: Number(v("perDay")) } };
    }
    if (action === "region") return { region: v("region") || null };
    if (action === "expiry") {
      if (!v("expiresAt")) throw new Error("Choose a date and time, or clear the expiry.");
      return { expiresAt: new Date(v("expiresAt")).toISOString() };
    }
    throw new Error(`unknown action ${action}`);
  }

  const SAID = {
    rename: (k) => `Renamed to ${k.name}.`,
    owner: (k) => (k.ownerId ? `Owner is now ${k.ownerId}.` : "Owner cleared."),
    meta: (k) => (k.meta ? "Metadata saved." : "Metadata cleared."),
    plan: (k) =>
      `Plan is now ${k.plan} (${fmt(k.limits.perMinute)}/min, ${fmt(k.limits.perDay)}/day).`,
    region: (k) =>
      k.region
        ? `Region is now ${k.region}: it applies if the key has never been used.`
        : "Region cleared: the quota object is created near the key's first request.",
    expiry: (k) =>
      k.expiresAt ? `Expires ${localDateTime.format(new Date(k.expiresAt))}.` : "No expiry.",
  };

  async function submitAction(form) {
    const action = form.dataset.action;
    const output = $(".result", form);
    const key = current;
    if (!key) return;
    const path = `/keys/${key.id}`;
    if (action === "roll") {
      const grace = Number(form.elements.gracePeriodSeconds.value);
      const rolled = await api("POST", `${path}/roll`, { gracePeriodSeconds: grace });
      await refreshAfter();
      showSecret($("#roll-secret"), rolled.key);
      report(
        output,
        `New secret issued; the old one works until ${localDateTime.format(new Date(rolled.previousSecretExpiresAt))}.`,
      );
      return;
    }
    if (action === "state") {
      if (key.status === "disabled") {
        await api("PATCH", path, { enabled: true });
        await refreshAfter();
        report(output, `${key.name} is enabled.`);
      } else {
        const sure = await confirmed(
          `Disable ${key.name}? Its requests get 401 until it is enabled again.`,
          "Disable",
        );
        if (!sure) return report(output, "Not disabled.", "");
        await api("PATCH", path, { enabled: false });
        await refreshAfter();
        report(output, `${key.name} is disabled.`);
      }
      return;
    }
    const updated = await api("PATCH", path, patchOf(action, form));
    await refreshAfter();
    report(output, SAID[action](updated));
  }

  async function clearExpiry(button) {
    const output = $(".result", button.form);
    const updated = await api("PATCH", `/keys/${current.id}`, { expiresAt: null });
    await refreshAfter();
    report(output, SAID.expiry(updated));
  }

  async function unban(button) {
    const output = $(".result", button.form);
    await api("POST", `/keys/${current.id}/unban`);
    await refreshAfter();
    report(output, `${current.name} is no longer banned.`);
  }

  async function revoke(button) {
    const output = $(".result", button.form);
    const key = current;
    const sure = await confirmed(
      `Revoke ${key.name}? This is final: the key is refused from its next request and cannot be enabled again.`,
      "Revoke",
    );
    if (!sure) return report(output, "Not revoked.", "");
    await api("DELETE", `/keys/${key.id}`);
    await refreshAfter();
    report(output, `${key.name} is revoked.`);
  }

  // ------------------------------------------------------------------ webhook endpoints
  let hooksQuery = new URLSearchParams();
  let nextHooksCursor = null;
  let hooksShown = 0;
  /** A signing secret just issued by "create", shown on the endpoint's page once. */
  let issuedHookSecret = null;
  let currentHook = null;

  /** Whether an endpoint receives deliveries: a badge, and why not on hover. */
  function hookState(h) {
    const state = badge(h.enabled ? "enabled" : "disabled", h.enabled ? "active" : "disabled");
    if (!h.enabled) state.title = h.disabledReason ?? "";
    return state;
  }

  async function showHooks(query) {
    hooksQuery = new URLSearchParams(query);
    hooksQuery.delete("cursor");
    fillForm($("#hook-filters"), hooksQuery);
    await loadHooks();
  }

  async function loadHooks(more = false) {
    const params = new URLSearchParams(hooksQuery);
    params.set("limit", String(HOOKS_PAGE));
    if (more && nextHooksCursor) params.set("cursor", nextHooksCursor);
    const page = await api("GET", `/webhooks?${params}`);
    const body = $("#hook-table tbody");
    if (!more) {
      body.replaceChildren();
      hooksShown = 0;
    }
    for (const h of page.data) {
      const name = el("span", undefined, { class: "name" });
      name.append(
        el("a", h.url, { href: `${BASE}/webhooks/${h.id}` }),
        el("small", h.description ?? h.id),
      );
      const row = el("tr", undefined, { "data-hook-id": h.id });
      row.append(
        cell("Endpoint", name),
        cell("Owner", h.ownerId ?? "every owner"),
        cell("Events", h.eventTypes.join(", ")),
        cell("State", hookState(h)),
      );
      body.append(row);
    }
    hooksShown += page.data.length;
    const filtered = hooksQuery.has("ownerId");
    const none = hooksShown === 0;
    $("#hook-table").hidden = none;
    $("#no-hooks").hidden = !(none && filtered);
    $("#first-hook").hidden = !(none && !filtered);
    $("#clear-hook-filters").hidden = !filtered;
    $("#hooks-foot").hidden = none;
    nextHooksCursor = page.nextCursor;
    $("#more-hooks").hidden = !page.nextCursor;
    $("#hooks-count").textContent =
      `${fmt(hooksShown)} ${hooksShown === 1 ? "endpoint" : "endpoints"}${page.nextCursor ? ", more to show" : ""}`;
  }

  const checkedTypes = (form) =>
    $$('input[name="eventTypes"]:checked', form).map((box) => box.value);

  /** The owner id field takes input only once "one owner" is chosen. */
  function syncOwnerField() {
    const form = $("#hook-form");
    form.elements.ownerId.disabled = form.elements.ownerScope.value !== "one";
  }

  async function createHook(event) {
    event.preventDefault();
    const form = $("#hook-form");
    const v = formValues(form);
    const body = { url: v.url ?? "", eventTypes: checkedTypes(form) };
    // Whom the endpoint is for is chosen, never assumed: an endpoint for every owner hears
    // about every customer's keys.
    if (!v.ownerScope) throw new Error("Choose whose keys it is for: one owner, or every owner.");
    if (v.ownerScope === "one" && !v.ownerId)
      throw new Error("Give the owner id, or choose every owner.");
    body.ownerId = v.ownerScope === "one" ? v.ownerId : null;
    if (!body.eventTypes.length) throw new Error("Choose at least one event type.");
    if (v.description) body.description = v.description;
    const created = await api("POST", "/webhooks", body);
    form.reset();
    syncOwnerField();
    issuedHookSecret = { id: created.id, secret: created.secret };
    await navigate(`${BASE}/webhooks/${created.id}`);
  }

  /** Shows endpoint `id`; a 404 is the "no such page" view. */
  async function openHook(id) {
    let hook;
    // Its entries are read with it: they also tell what became of an endpoint deleted since.
    const audit = api("GET", `/audit?endpointId=${id}&limit=${KEY_AUDIT_ENTRIES}`);
    try {
      hook = await api("GET", `/webhooks/${id}`);
    } catch (err) {
      const trail = await audit.catch(() => null);
      if (!(err instanceof ApiFailure && err.status === 404)) throw err;
      for (const section of $$("#app > [data-view]"))
        section.hidden = section.dataset.view !== "missing";
      // The newest entry of a deleted endpoint is its deletion: say so, and link its trail.
      const deleted = trail?.data[0]?.action === "webhook_delete" ? trail.data[0] : null;
      $("#missing-text").textContent = deleted
        ? `Webhook endpoint ${id} was deleted by ${deleted.actor}. `
        : `No webhook endpoint has the id ${id}.`;
      if (deleted)
        $("#missing-text").append(
          el("a", "Its audit trail", { href: urlOf(`${BASE}/audit`, { endpointId: id }) }),
        );
      return;
    }
    if (currentHook?.id !== id) {
      for (const output of $$("#hook output.result")) report(output, "", "");
      for (const box of $$("#hook .secret")) box.hidden = true;
      report($("#deliveries-result"), "", "");
    }
    currentHook = hook;
    $("#hook").dataset.hookId = id;
    $("#hook").dataset.enabled = String(hook.enabled);
    $("#crumb-hook").textContent = hook.id;
    $("#hook-title").textContent = hook.url;
    $("#hook-badges").replaceChildren(hookState(hook));
    if (issuedHookSecret?.id === id) {
      showSecret($("#hook-created-secret"), issuedHookSecret.secret);
      issuedHookSecret = null;
    }
    const fields = [
      ["Id", hook.id],
      ["URL", hook.url],
      ["Owner", hook.ownerId ?? "every owner's keys"],
      ["Event types", hook.eventTypes.join(", ")],
      ["Description", hook.description ?? "—"],
      ["State", hook.enabled ? "enabled" : `disabled: ${hook.disabledReason}`],
    ];
    if (!hook.enabled) fields.push(["Disabled", timeEl(hook.disabledAt)]);
    fields.push(
      ["Created", timeEl(hook.createdAt)],
      ["Secret last rolled", hook.secretRolledAt ? timeEl(hook.secretRolledAt) : "never"],
    );
    if (hook.previousSecretExpiresAt && Date.parse(hook.previousSecretExpiresAt) > Date.now())
      fields.push(["Old secret signs until", timeEl(hook.previousSecretExpiresAt)]);
    const list = $("#hook-fields");
    list.replaceChildren();
    for (const [name, value] of fields) {
      const dd = el("dd");
      if (value instanceof Node) dd.append(value);
      else dd.textContent = value;
      list.append(el("dt", name), dd);
    }
    for (const box of $$('#hook form[data-hook-action="events"] input[name="eventTypes"]'))
      box.checked = hook.eventTypes.includes(box.value);
    $("#hook-toggle").textContent = hook.enabled ? "Disable…" : "Enable";
    showAudit($("#hook-audit"), (await audit).data, "No changes recorded for this endpoint.");
    $("#hook-audit-all").href = urlOf(`${BASE}/audit`, { endpointId: id });
    await loadDeliveries();
  }

  // A delivery's status as a badge of the key states' colours: delivered green, failed and dead
  // red, retrying amber; pending and skipped plain.
  const DELIVERY_BADGE = {
    delivered: "active",
    failed: "banned",
    dead: "banned",
    retrying: "disabled",
  };
  let nextDeliveriesCursor = null;
  let deliveriesShown = 0;

  /** The open endpoint's delivery log, newest first, a page at a time. */
  async function loadDeliveries(more = false) {
    const hook = currentHook;
    const params = new URLSearchParams({ limit: String(DELIVERIES_PAGE) });
    if (more && nextDeliveriesCursor) params.set("cursor", nextDeliveriesCursor);
    const page = await api("GET", `/webhooks/${hook.id}/deliveries?${params}`);
    if (currentHook !== hook) return;
    const body = $("#delivery-table tbody");
    if (!more) {
      body.replaceChildren();
      deliveriesShown = 0;
    }
    for (const d of page.data) {
      const event = el("span", undefined, { class: "name" });
      event.append(el("strong", d.eventType), el("small", d.eventId));
      // The last attempt's answer, and under it what went wrong (a timeout, a refused connection).
      const response = el("span", undefined, { class: "name" });
      response.append(el("span", d.responseStatus ?? "no answer"));
      if (d.lastError) response.append(el("small", d.lastError));
      const status = badge(d.status, DELIVERY_BADGE[d.status] ?? d.status);
      if (d.nextAttemptAt && d.status === "retrying")
        status.title = `Next attempt ${localDateTime.format(new Date(d.nextAttemptAt))}`;
      const again = el("button", "Send again", { type: "button", class: "small" });
      again.addEventListener(
        "click",
        guarded(() => sendAgain(d), $("#deliveries-result")),
      );
      const row = el("tr", undefined, { "data-delivery-id": d.id, "data-status": d.status });
      row.append(
        cell("Event", event),
        cell("Status", status),
        cell("Attempts", fmt(d.attempts), { class: "number" }),
        cell("Response", response),
        cell("Latency", d.latencyMs === null ? "—" : `${fmt(d.latencyMs)} ms`, {
          class: "number",
        }),
        cell("Queued", timeEl(d.createdAt)),
        cell("", again, { "data-writes": "" }),
      );
      body.append(row);
    }
    deliveriesShown += page.data.length;
    const none = deliveriesShown === 0;
    $("#delivery-table").hidden = none;
    $("#no-deliveries").hidden = !none;
    $("#deliveries-foot").hidden = none;
    nextDeliveriesCursor = page.nextCursor;
    $("#more-deliveries").hidden = !page.nextCursor;
    $("#deliveries-count").textContent =
      `${fmt(deliveriesShown)} ${deliveriesShown === 1 ? "delivery" : "deliveries"}${page.nextCursor ? ", more to show" : ""}`;
  }

  async function sendTestEvent() {
    const delivery = await api("POST", `/webhooks/${currentHook.id}/test`);
    await loadDeliveries();
    report($("#deliveries-result"), `Test event ${delivery.eventId} queued.`);
  }

  async function sendAgain(delivery) {
    await api("POST", `/webhooks/${currentHook.id}/deliveries/${delivery.id}/resend`);
    await loadDeliveries();
    report(
      $("#deliveries-result"),
      `${delivery.eventType} ${delivery.eventId} queued again (same event id: a receiver that has it ignores it).`,
    );
  }

  async function hookAction(form) {
    const hook = currentHook;
    const output = $(".result", form);
    const path = `/webhooks/${hook.id}`;
    const action = form.dataset.hookAction;
    if (action === "events") {
      const eventTypes = checkedTypes(form);
      if (!eventTypes.length) throw new Error("Choose at least one event type.");
      await api("PATCH", path, { eventTypes });
      await openHook(hook.id);
      return report(output, `Sends ${eventTypes.join(", ")}.`);
    }
    if (action === "roll") {
      const gracePeriodSeconds = Number(form.elements.gracePeriodSeconds.value);
      const rolled = await api("POST", `${path}/roll-secret`, { gracePeriodSeconds });
      await openHook(hook.id);
      showSecret($("#hook-rolled-secret"), rolled.secret);
      return report(
        output,
        gracePeriodSeconds
          ? `New signing secret; the old one also signs until ${localDateTime.format(new Date(rolled.previousSecretExpiresAt))}.`
          : "New signing secret; the old one no longer signs.",
      );
    }
    if (hook.enabled) {
      const sure = await confirmed(
        `Disable ${hook.url}? It receives no deliveries until it is enabled again.`,
        "Disable",
      );
      if (!sure) return report(output, "Not disabled.", "");
    }
    await api("PATCH", path, { enabled: !hook.enabled });
    await openHook(hook.id);
    report(output, hook.enabled ? "Disabled." : "Enabled: deliveries resume.");
  }

  async function deleteHook(button) {
    const hook = currentHook;
    const sure = await confirmed(
      `Delete ${hook.url}? It and its delivery log are gone for good; events are no longer sent to it.`,
      "Delete",
    );
    if (!sure) return report($(".result", button.form), "Not deleted.", "");
    // 204: no body to read.
    await request("DELETE", `/webhooks/${hook.id}`);
    await navigate(`${BASE}/webhooks`);
    say(`Deleted ${hook.url}.`);
  }

  // ------------------------------------------------------------------ wiring
  document.addEventListener("DOMContentLoaded", () => {
    document.addEventListener("click", followLink);
    window.addEventListener("popstate", () => guarded(render)());
    $("#login-form").addEventListener("submit", guarded(logIn));
    $("#logout").addEventListener("click", () => logOut());
    $("#filters").addEventListener("submit", guarded(filterKeys));
    $("#more-keys").addEventListener(
      "click",
      guarded(() => loadKeys(true)),
    );
    $("#create-form").addEventListener("submit", guarded(createKey, $("#create-form .result")));
    const createPlan = $("#create-form").elements.plan;
    createPlan.addEventListener("change", () =>
      $("#create-form").classList.toggle("enterprise", createPlan.value === "enterprise"),
    );
    for (const button of $$(".copy-secret"))
      button.addEventListener(
        "click",
        guarded(() => copySecret(button)),
      );
    $("#audit-filters").addEventListener("submit", guarded(filterAudit));
    $("#hook-filters").addEventListener(
      "submit",
      guarded((event) => {
        event.preventDefault();
        return navigate(urlOf(`${BASE}/webhooks`, formValues($("#hook-filters"))));
      }),
    );
    $("#more-hooks").addEventListener(
      "click",
      guarded(() => loadHooks(true)),
    );
    $("#hook-form").addEventListener("submit", guarded(createHook, $("#hook-form .result")));
    $("#hook-form").addEventListener("change", (event) => {
      if (event.target.name !== "ownerScope") return;
      syncOwnerField();
      if (event.target.value === "one") event.target.form.elements.ownerId.focus();
    });
    for (const form of $$("#hook form.action")) {
      const output = $(".result", form);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        guarded(() => hookAction(form), output)();
      });
    }
    $("#send-test").addEventListener("click", guarded(sendTestEvent, $("#deliveries-result")));
    $("#refresh-deliveries").addEventListener(
      "click",
      guarded(() => loadDeliveries(), $("#deliveries-result")),
    );
    $("#more-deliveries").addEventListener(
      "click",
      guarded(() => loadDeliveries(true), $("#deliveries-result")),
    );
    const deleteButton = $("#hook [data-hook-delete]");
    deleteButton.addEventListener(
      "click",
      guarded(() => deleteHook(deleteButton), $(".result", deleteButton.form)),
    );
    $("#more-audit").addEventListener(
      "click",
      guarded(() => loadAudit(true)),
    );
    $("#usage-range").addEventListener("change", guarded(changeRange));
    $("#download-key-csv").addEventListener("click", guarded(downloadKeyCsv));
    $("#day-form").addEventListener("submit", guarded(chooseDay, $("#day-form .result")));
    $("#download-day-csv").addEventListener(
      "click",
      guarded(downloadDayCsv, $("#day-form .result")),
    );
    for (const form of $$("#actions form.action")) {
      const output = $(".result", form);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        guarded(() => submitAction(form), output)();
      });
    }
    const planForm = $('#actions form[data-action="plan"]');
    planForm.elements.plan.addEventListener("change", () =>
      planForm.classList.toggle("enterprise", planForm.elements.plan.value === "enterprise"),
    );
    const clear = $("#actions [data-clear-expiry]");
    clear.addEventListener(
      "click",
      guarded(() => clearExpiry(clear), $(".result", clear.form)),
    );
    const unbanButton = $("#actions [data-unban]");
    unbanButton.addEventListener(
      "click",
      guarded(() => unban(unbanButton), $(".result", unbanButton.form)),
    );
    const revokeButton = $(`#actions button[data-action="revoke"]`);
    revokeButton.addEventListener(
      "click",
      guarded(() => revoke(revokeButton), $(".result", revokeButton.form)),
    );
    // The chart is drawn at its real width: again when that changes.
    let lastWidth = 0;
    new ResizeObserver(([entry]) => {
      const width = Math.round(entry.contentRect.width);
      if (width !== lastWidth && usageDays.length) drawUsage();
      lastWidth = width;
    }).observe($("#usage-chart"));
    // /admin is the key list: say so in the address bar.
    if (location.pathname.replace(/\/+$/, "") === BASE)
      history.replaceState(null, "", `${BASE}/keys${location.search}`);
    if (session.get()) guarded(() => Promise.all([loadAccess(), render()]))();
    else showApp(false);
  });
})();
