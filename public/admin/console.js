// The operator console's browser code: plain DOM, no framework, no other origin. A static asset
// loaded by the page (src/routes/console/) under a CSP of default-src 'self'. Everything shown
// comes from the admin API and goes into the page as text (textContent), never as HTML. The usage
// chart is plain SVG drawn here: a few dozen elements, no library to ship or to allow in the CSP.

(() => {
  const TOKEN_KEY = "animal-store-admin-token";
  const API = "/admin/v1";
  const SVG = "http://www.w3.org/2000/svg";
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

  /** A time in the reader's own time zone, with the UTC time on hover. */
  function timeEl(iso) {
    if (!iso) return el("span", "—");
    return el("time", localDateTime.format(new Date(iso)), { datetime: iso, title: utcText(iso) });
  }

  const totalOf = (d) =>
    d.admitted + d.refused.rate_limited + d.refused.quota_exceeded + d.refused.key_banned;

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

  function formQuery(form) {
    const params = new URLSearchParams();
    for (const [name, value] of new FormData(form))
      if (String(value).trim()) params.set(name, String(value).trim());
    return params;
  }

  /** A table cell that names its column (the narrow layout shows it as a label). */
  function cell(label, content) {
    const td = el("td", undefined, { "data-label": label });
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    return td;
  }

  function stateCell(key) {
    const box = el("span", key.status, { class: `state ${key.status}` });
    const wrap = el("span");
    wrap.append(box);
    if (key.activity?.bannedUntil) {
      wrap.append(" ", el("span", "banned", { class: "state banned" }));
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

  async function loadKeys(more = false) {
    const params = formQuery($("#filters"));
    params.set("limit", "50");
    if (more && nextKeysCursor) params.set("cursor", nextKeysCursor);
    const page = await api("GET", `/keys?${params}`);
    const body = $("#key-table tbody");
    if (!more) body.replaceChildren();
    for (const key of page.data) {
      const row = el("tr", undefined, { "data-key-id": key.id, tabindex: "0" });
      const name = el("span", undefined, { class: "name" });
      name.append(el("strong", key.name), el("small", key.id));
      row.append(
        cell("Name", name),
        cell("Plan", key.plan),
        cell("State", stateCell(key)),
        cell("Today", todayCell(key.activity)),
        cell("Last used", key.activity ? (key.activity.lastUsedDay ?? "never") : "—"),
        cell("Owner", key.ownerId ?? "—"),
      );
      const open = guarded(() => openKey(key.id));
      row.addEventListener("click", open);
      row.addEventListener("keydown", (event) => {
        if (event.key === "Enter") open();
      });
      if (current?.id === key.id) row.classList.add("selected");
      body.append(row);
    }
    $("#no-keys").hidden = body.children.length > 0;
    nextKeysCursor = page.nextCursor;
    $("#more-keys").hidden = !page.nextCursor;
  }

  async function createKey(event) {
    event.preventDefault();
    const formEl = $("#create-form");
    const form = new FormData(formEl);
    const body = { name: String(form.get("name")), plan: String(form.get("plan")) };
    const perMinute = String(form.get("perMinute") ?? "");
    const perDay = String(form.get("perDay") ?? "");
    if (perMinute || perDay) body.limits = { perMinute: Number(perMinute), perDay: Number(perDay) };
    const ownerId = String(form.get("ownerId") ?? "").trim();
    if (ownerId) body.ownerId = ownerId;
    const region = String(form.get("region") ?? "");
    if (region) body.region = region;
    const created = await api("POST", "/keys", body);
    showSecret($("#create-secret"), created.key);
    formEl.reset();
    report($(".result", formEl), `Created ${created.name} (${created.id}).`);
    await Promise.all([loadKeys(), loadAudit()]);
    await openKey(created.id);
  }

  function showSecret(box, secret) {
    $(".secret-value", box).textContent = secret;
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
    for (const box of $$("#actions .secret")) box.hidden = true;
  }

  let lastOpen = 0;

  /**
   * Shows key `id`. The detail is aria-busy until the last open asked for is drawn; an earlier
   * open that answers later is dropped, so a slow answer never redraws an older state over a
   * newer one, or over what the operator has typed into the action forms since.
   */
  async function openKey(id) {
    const open = ++lastOpen;
    const detail = $("#detail");
    detail.setAttribute("aria-busy", "true");
    try {
      await drawKey(id, () => open === lastOpen);
    } finally {
      if (open === lastOpen) detail.removeAttribute("aria-busy");
    }
  }

  async function drawKey(id, isLatest) {
    const [key, audit] = await Promise.all([
      api("GET", `/keys/${id}`),
      api("GET", `/audit?keyId=${id}&limit=20`),
    ]);
    if (!isLatest()) return;
    if (current?.id !== id) clearResults();
    current = key;
    for (const row of $$("#key-table tbody tr"))
      row.classList.toggle("selected", row.dataset.keyId === id);
    const detail = $("#detail");
    detail.hidden = false;
    detail.dataset.keyId = id;
    detail.dataset.status = key.status;
    $("#detail-title").textContent = `${key.name} — ${key.status}`;
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
      const dd = el("dd");
      if (value instanceof Node) dd.append(value);
      else dd.textContent = value;
      fields.append(el("dt", name), dd);
    }
    const now = $("#detail-now");
    now.replaceChildren();
    if (key.usage) {
      const { minute, day, bannedUntil } = key.usage;
      now.append(
        `This minute: ${fmt(minute.count)} of ${fmt(minute.limit)}. Today: ${fmt(day.count)} of ${fmt(day.limit)}.`,
      );
      if (bannedUntil) now.append(" Banned until ", timeEl(bannedUntil), ".");
    } else {
      now.textContent = "The key's quota object could not be reached.";
    }
    const revoked = key.status === "revoked";
    $("#actions").hidden = revoked;
    $("#no-actions").hidden = !revoked;
    fillActionForms(key);
    showAudit($("#detail-audit"), audit.data);
    await loadUsage();
  }

  function rangeDays() {
    return Number($("#usage-range").elements.days.value || 30);
  }

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
    const { from, to } = rangeOf(days);
    const usage = await api("GET", `/keys/${current.id}/usage?from=${from}&to=${to}`);
    usageDays = usage.data;
    $("#usage-heading").textContent = `Usage, last ${days} days`;
    drawUsage();
    fillUsageTable(usageDays);
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
    const height = 240;
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
          `Today: ${fmt(last?.admitted ?? 0)} admitted, ${fmt(last ? totalOf(last) - last.admitted : 0)} refused.`;
  }

  function fillUsageTable(days) {
    const body = $("#usage-table tbody");
    body.replaceChildren();
    for (const d of [...days].reverse()) {
      const row = el("tr", undefined, { "data-day": d.day });
      row.append(
        el("th", d.day, { scope: "row" }),
        el("td", fmt(d.admitted)),
        el("td", fmt(d.refused.rate_limited)),
        el("td", fmt(d.refused.quota_exceeded)),
        el("td", fmt(d.refused.key_banned)),
        el("td", fmt(d.stranded)),
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
    } while (cursor);
    return text;
  }

  const rowsOf = (csv) => csv.split("\r\n").filter(Boolean).length - 1;

  async function downloadKeyCsv() {
    if (!current) return;
    const { from, to } = rangeOf(rangeDays());
    const csv = await fetchCsv(`/keys/${current.id}/usage?from=${from}&to=${to}`);
    const filename = `${current.id}-usage-${from}-to-${to}.csv`;
    saveFile(csv, filename);
    say(`Downloaded ${filename} (${rowsOf(csv)} days).`);
  }

  async function showDay(event) {
    event?.preventDefault();
    const form = $("#day-form");
    const day = form.elements.day.value;
    if (!day) throw new Error("Choose a day first.");
    const rows = [];
    let cursor = null;
    do {
      const page = await api(
        "GET",
        `/usage?day=${day}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      rows.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    const body = $("#day-table tbody");
    body.replaceChildren();
    for (const r of rows) {
      const row = el("tr", undefined, { "data-key-id": r.keyId });
      const name = el("span", undefined, { class: "name" });
      name.append(el("strong", r.name), el("small", r.keyId));
      row.append(
        cell("Key", name),
        cell("Plan", r.plan),
        cell("Owner", r.ownerId ?? "—"),
        cell("Admitted", fmt(r.admitted)),
        cell("Refused", fmt(totalOf(r) - r.admitted)),
        cell("Stranded", fmt(r.stranded)),
      );
      body.append(row);
    }
    $("#day-table").hidden = false;
    const admitted = rows.reduce((n, r) => n + r.admitted, 0);
    report($(".result", form), `${day}: ${fmt(rows.length)} keys, ${fmt(admitted)} admitted.`);
  }

  async function downloadDayCsv() {
    const form = $("#day-form");
    const day = form.elements.day.value;
    if (!day) throw new Error("Choose a day first.");
    const csv = await fetchCsv(`/usage?day=${day}&limit=100`);
    const filename = `usage-${day}.csv`;
    saveFile(csv, filename);
    report($(".result", form), `Downloaded ${filename} (${fmt(rowsOf(csv))} keys).`);
  }

  // ------------------------------------------------------------------ audit
  const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

  /** A changed value as a reader wants it: times local (UTC on hover), limits in words. */
  function valueEl(value) {
    if (value === null || value === undefined) return el("span", "—");
    if (typeof value === "string" && ISO_TIME.test(value)) return timeEl(value);
    if (typeof value === "string") return el("span", value);
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

  function showAudit(list, entries) {
    list.replaceChildren();
    if (!entries.length) list.append(el("li", "No entries."));
    for (const e of entries) {
      const item = el("li", undefined, {
        "data-action": e.action,
        "data-key-id": e.keyId,
        "data-actor": e.actor,
      });
      const head = el("div", undefined, { class: "entry-head" });
      head.append(
        timeEl(e.at),
        " ",
        el("span", e.actor, { class: e.actor === "system" ? "actor system" : "actor" }),
        " ",
        el("span", e.action, { class: `action ${e.action}` }),
        " ",
        el("code", e.keyId),
      );
      item.append(head);
      if (Object.keys(e.changes).length) item.append(diffList(e.changes, e.action === "create"));
      list.append(item);
    }
  }

  async function loadAudit(event) {
    event?.preventDefault();
    const params = formQuery($("#audit-filters"));
    params.set("limit", "50");
    const page = await api("GET", `/audit?${params}`);
    showAudit($("#audit-list"), page.data);
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

  /** Shows the key, the list and the audit trail as the action left them. */
  async function refreshAfter() {
    await Promise.all([loadKeys(), loadAudit(), openKey(current.id)]);
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
    $("#create-form").addEventListener("submit", guarded(createKey, $("#create-form .result")));
    for (const button of $$(".copy-secret"))
      button.addEventListener(
        "click",
        guarded(() => copySecret(button)),
      );
    $("#audit-filters").addEventListener("submit", guarded(loadAudit));
    $("#usage-range").addEventListener("change", guarded(loadUsage));
    $("#download-key-csv").addEventListener("click", guarded(downloadKeyCsv));
    $("#day-form").addEventListener("submit", guarded(showDay, $("#day-form .result")));
    $("#download-day-csv").addEventListener(
      "click",
      guarded(downloadDayCsv, $("#day-form .result")),
    );
    $("#day-form").elements.day.value = todayUtc();
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
    if (session.get()) {
      showApp(true);
      guarded(() => Promise.all([loadAccess(), loadKeys(), loadAudit()]))();
    } else {
      showApp(false);
    }
  });
})();
