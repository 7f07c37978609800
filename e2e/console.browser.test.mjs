// The operator console in a real headless browser: Debian's chromium driven by puppeteer-core
// (which never downloads a browser), against the Worker under `wrangler dev`. Run with
// `npm run test:browser`; CHROMIUM overrides the browser path (default /usr/bin/chromium).
// CONSOLE_SCREENSHOTS=<dir> also saves full-page screenshots at 1366 px and 390 px there.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { ROOT, startApi } from "../scripts/lib/local-server.mjs";
import { waitForRoomInDay } from "./helpers.mjs";

// This test's own ports (wrangler dev and its inspector), apart from `npm run dev`'s 8787.
const PORT = Number(process.env.CONSOLE_TEST_PORT ?? 8840);
const INSPECTOR_PORT = Number(process.env.CONSOLE_TEST_INSPECTOR_PORT ?? 9340);
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;
const STEP_MS = 15_000;

let api;
let browser;
let page;
let downloads;
const requests = [];
const failedResponses = [];
const consoleErrors = [];

before(async () => {
  api = await startApi({ port: PORT, inspectorPort: INSPECTOR_PORT, localObservability: false });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // CI runs as root, where Chromium's sandbox cannot start.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run"],
  });
  downloads = mkdtempSync(path.join(tmpdir(), "console-downloads-"));
  const cdp = await browser.target().createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
  page = await browser.newPage();
  await page.setViewport({ width: 1366, height: 900 });
  page.setDefaultTimeout(STEP_MS);
  page.on("request", (request) => requests.push(request.url()));
  page.on("response", (response) => {
    if (response.status() >= 400)
      failedResponses.push(`${response.status()} ${new URL(response.url()).pathname}`);
  });
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  // Records every CSP violation the page meets (an inline script or style, another origin…).
  await page.evaluateOnNewDocument(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
    );
  });
});

after(async () => {
  await browser?.close();
  await api?.stop();
  if (downloads) rmSync(downloads, { recursive: true, force: true });
});

const bearer = (key) => ({ Authorization: `Bearer ${key}` });

/** Makes `n` API requests with `key`, from outside the browser, so the key has usage to show. */
async function useKey(key, n, expected = 200) {
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${api.url}/v1/pets?limit=1`, { headers: bearer(key) });
    assert.equal(res.status, expected, await res.text());
  }
}

const textOf = (selector) => page.$eval(selector, (el) => el.textContent ?? "");
const today = () => new Date().toISOString().slice(0, 10);
/** The current UTC minute window's start, in ms (the quota's minute window is aligned to it). */
const minuteWindow = () => Math.floor(Date.now() / 60_000) * 60_000;

/** Waits for the next UTC minute when fewer than `seconds` are left in this one. */
async function waitForRoomInMinute(seconds) {
  const left = minuteWindow() + 60_000 - Date.now();
  if (left < seconds * 1000) await new Promise((r) => setTimeout(r, left + 50));
}

/** Waits until the detail view shows key `id` with `text` in `selector`. */
function waitForText(selector, text) {
  return page.waitForFunction(
    (s, t) => document.querySelector(s)?.textContent?.includes(t),
    {},
    selector,
    text,
  );
}

/** Submits the open key's action form `action` (after `fill`), and waits for its result text. */
async function act(action, expected, fill = async () => {}) {
  const form = `#actions form[data-action="${action}"]`;
  await page.$eval(`${form} output`, (o) => {
    o.textContent = "";
  });
  await fill(form);
  await page.click(`${form} button[type=submit]`);
  await waitForText(`${form} output`, expected);
}

async function setField(selector, value) {
  await page.$eval(
    selector,
    (el, v) => {
      el.value = v;
    },
    value,
  );
}

/** The key row of `id` in the key table. */
const rowOf = (id) => page.waitForSelector(`#key-table tbody tr[data-key-id="${id}"]`);

async function openKey(id) {
  await (await rowOf(id)).click();
  // Not busy: the open this click started has drawn the key (it may be on show already).
  await page.waitForFunction(
    (k) =>
      document.querySelector("#detail")?.dataset.keyId === k &&
      !document.querySelector("#detail")?.hasAttribute("aria-busy") &&
      document.querySelectorAll("#usage-chart g.day").length > 0,
    {},
    id,
  );
}

/** The chart's bars as drawn: one per day, with the numbers it was drawn from. */
const chartDays = () =>
  page.$$eval("#usage-chart g.day", (groups) =>
    groups.map((g) => ({
      day: g.dataset.day,
      admitted: Number(g.dataset.admitted),
      refused: Number(g.dataset.refused),
    })),
  );

/** A file the browser downloaded, once it is complete. */
async function downloaded(name) {
  const file = path.join(downloads, name);
  for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(existsSync(file), `${name} was not downloaded`);
  return readFileSync(file, "utf8");
}

/** Page width beyond the viewport (0: no horizontal overflow). */
const overflow = () =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

let keyId;
let keyName;
let secret;

test("an operator logs in, creates a key and sees who uses what: today's share, last used, the chart and its numbers", async () => {
  // What it reads back as "today" (the share, the chart, the CSV) was counted today: the test
  // runs within one UTC day.
  await waitForRoomInDay(180);
  const response = await page.goto(`${api.url}/admin`, { waitUntil: "networkidle0" });
  assert.equal(response.status(), 200);
  assert.match(response.headers()["content-security-policy"], /^default-src 'self'/);

  // Logged out: only the login form shows. A wrong token is refused with the API's message.
  assert.equal(await page.$eval("#app", (el) => el.hidden), true);
  await page.type("#token", "not-the-admin-token");
  await page.click("#login-form button[type=submit]");
  await page.waitForFunction(() =>
    document.querySelector("#login .hint")?.textContent?.startsWith("Not accepted"),
  );
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);

  await page.type("#token", api.adminToken);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#app:not([hidden])");
  assert.equal(await page.evaluate(() => document.cookie), "");
  assert.ok(!page.url().includes(api.adminToken));

  // Create a key through the page: the secret is shown once, next to the form, and it is listed.
  const name = `browser-${Date.now()}`;
  keyName = name;
  await page.type("#create-form input[name=name]", name);
  await page.select("#create-form select[name=plan]", "pro");
  await page.type("#create-form input[name=ownerId]", "acct-browser");
  await page.select("#create-form select[name=region]", "weur");
  await page.click("#create-form button[type=submit]");
  await page.waitForSelector("#create-secret:not([hidden])");
  secret = await textOf("#create-secret .secret-value");
  assert.match(secret, /^pet_test_[0-9A-Za-z]{43}_[0-9A-Za-z]{20}_[0-9a-f]{32}$/);
  assert.match(await textOf("#create-form output"), /Created/);
  const row = await page.waitForFunction(
    (n) =>
      [...document.querySelectorAll("#key-table tbody tr")].find((tr) =>
        tr.textContent.includes(n),
      ),
    {},
    name,
  );
  keyId = await row.evaluate((tr) => tr.dataset.keyId);
  assert.match(keyId, /^key_[0-9A-Za-z]{20}$/);
  assert.match(
    await row.evaluate((tr) => tr.textContent),
    /pro.*active.*0 \/ 10K.*never.*acct-browser/,
  );

  // A brand-new key: the chart says so instead of showing a blank box.
  await page.waitForFunction(
    (id) => document.querySelector("#detail")?.dataset.keyId === id,
    {},
    keyId,
  );
  await page.waitForSelector("#usage-figure.empty");
  assert.match(await textOf("#usage-summary"), /^No usage yet/);
  assert.equal(await textOf("#usage-chart .empty-text"), "No usage yet");

  // Use the key, then find it by the start of its secret: today's share and last used show.
  // The three requests and the detail view below fall in one UTC minute window (the view shows
  // "this minute" as of its draw); the steps between take well under 45 s.
  await waitForRoomInMinute(45);
  const usedInMinute = minuteWindow();
  await useKey(secret, 3);
  assert.equal(minuteWindow(), usedInMinute, "the three requests spanned a minute boundary");
  await setField("#filters input[name=q]", secret.slice(0, 20));
  // Permits leased to the Worker's isolate count as used until they come back (within seconds),
  // so the list is asked again until it shows exactly the 3 requests.
  await page.waitForFunction(
    async (id) => {
      document.querySelector("#filters button[type=submit]").click();
      await new Promise((r) => setTimeout(r, 300));
      const rows = document.querySelectorAll("#key-table tbody tr");
      return (
        rows.length === 1 && rows[0].dataset.keyId === id && rows[0].textContent.includes("3 / 10K")
      );
    },
    { polling: 500 },
    keyId,
  );
  const cells = await page.$$eval(`#key-table tbody tr[data-key-id="${keyId}"] td`, (tds) =>
    Object.fromEntries(tds.map((td) => [td.dataset.label, td.textContent])),
  );
  assert.equal(cells["Last used"], today());
  assert.match(cells.Today, /^3 \/ 10K \(0\.03%\)$/);
  assert.equal(cells.State, "active");

  // Open it: axes with dates and a scale, a legend, today marked, and the numbers of the usage API.
  await openKey(keyId);
  await waitForText("#usage-summary", "Today: 3 admitted");
  const yLabels = await page.$$eval("#usage-chart .y-axis text[data-value]", (t) =>
    t.map((x) => x.textContent),
  );
  assert.ok(yLabels.length >= 3, `y axis: ${yLabels}`);
  assert.equal(yLabels[0], "0");
  const xLabels = await page.$$eval("#usage-chart .x-axis text[data-day]", (t) =>
    t.map((x) => x.dataset.day),
  );
  assert.ok(xLabels.length >= 4, `x axis: ${xLabels}`);
  assert.equal(xLabels.at(-1), today());
  assert.equal(await textOf("#usage-chart .today-label"), "today");
  assert.deepEqual(
    await page.$$eval("#usage-legend li", (lis) => lis.map((li) => li.textContent.trim())),
    ["Admitted", "Refused (rate limited, over quota, banned)"],
  );
  const own = await (await fetch(`${api.url}/v1/usage`, { headers: bearer(secret) })).json();
  const drawn = await chartDays();
  assert.equal(drawn.length, 30);
  assert.deepEqual(
    drawn,
    own.days.map((d) => ({
      day: d.day,
      admitted: d.admitted,
      refused: d.refused.rate_limited + d.refused.quota_exceeded + d.refused.key_banned,
    })),
  );
  assert.equal(drawn.at(-1).admitted, 3);
  const todayBarHeight = await page.$eval("#usage-chart g.today rect.admitted", (r) =>
    Number(r.getAttribute("height")),
  );
  assert.ok(todayBarHeight >= 2);
  // The same numbers as a table, newest first.
  assert.deepEqual(
    await page.$eval("#usage-table tbody tr", (tr) => [...tr.children].map((c) => c.textContent)),
    [today(), "3", "0", "0", "0", "0"],
  );
  assert.equal(await page.$$eval("#usage-table tbody tr", (r) => r.length), 30);
  // Drawn within the requests' minute window (checked after the read, so the draw was too).
  const detailNow = await textOf("#detail-now");
  assert.equal(
    minuteWindow(),
    usedInMinute,
    `the minute ended ${Date.now() - usedInMinute - 60_000} ms before the read`,
  );
  assert.match(detailNow, /This minute: 3 of 300\. Today: 3 of 10,000\./);
  // Times are local, with UTC on hover.
  assert.match(
    await page.$eval("#detail-fields time", (t) => t.getAttribute("title")),
    /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/,
  );

  // Ranges of 7 and 90 days.
  for (const days of [7, 90]) {
    await page.click(`#usage-range input[value="${days}"]`);
    await page.waitForFunction(
      (n) => document.querySelectorAll("#usage-chart g.day").length === n,
      {},
      days,
    );
    assert.equal((await chartDays()).at(-1).admitted, 3);
  }

  // The key's usage as CSV (the 90 days chosen), downloaded from the page.
  await page.click("#download-key-csv");
  const from = new Date(Date.now() - 89 * 86_400_000).toISOString().slice(0, 10);
  const csv = await downloaded(`${keyId}-usage-${from}-to-${today()}.csv`);
  const lines = csv.trim().split("\r\n");
  assert.equal(
    lines[0],
    '"day","admitted","rate_limited","quota_exceeded","key_banned","stranded"',
  );
  assert.equal(lines.length, 91);
  assert.equal(lines.at(-1), `"${today()}","3","0","0","0","0"`);
});

test("every CLI action works from the page, with its result beside it; revoked keys offer none", async () => {
  // Its audit filter and the day's usage read "today": the test runs within one UTC day.
  await waitForRoomInDay(180);
  await openKey(keyId);

  await act("rename", "Renamed to renamed-by-console", (form) =>
    setField(`${form} input[name=name]`, "renamed-by-console"),
  );
  await waitForText("#detail-title", "renamed-by-console");

  // The region chosen at creation is shown, in the detail and in its action form; changed, then
  // cleared (the key has not been used yet, so it still places the object).
  await waitForText("#detail-fields", "weur");
  assert.equal(
    await page.$eval('#actions form[data-action="region"] select', (s) => s.value),
    "weur",
  );
  await act("region", "Region is now apac", (form) =>
    page.select(`${form} select[name=region]`, "apac"),
  );
  await act("region", "Region cleared", (form) => page.select(`${form} select[name=region]`, ""));
  await waitForText("#detail-fields", "near its first request");

  await act("owner", "Owner is now acct-other", (form) =>
    setField(`${form} input[name=ownerId]`, "acct-other"),
  );
  await act("meta", "Metadata must be JSON", (form) => setField(`${form} textarea`, "{nope"));
  await act("meta", "Metadata saved", (form) =>
    setField(`${form} textarea`, '{"team": "billing", "tier": 2}'),
  );
  await waitForText("#detail-fields", '{"team":"billing","tier":2}');

  // Enterprise limits in the form (no window.prompt).
  await act("plan", "Plan is now enterprise (7/min, 700/day)", async (form) => {
    await page.select(`${form} select[name=plan]`, "enterprise");
    await setField(`${form} input[name=perMinute]`, "7");
    await setField(`${form} input[name=perDay]`, "700");
  });

  // Expiry: set (tomorrow, local time), then cleared.
  const tomorrow = new Date(Date.now() + 86_400_000);
  const pad = (n) => String(n).padStart(2, "0");
  const local = `${tomorrow.getFullYear()}-${pad(tomorrow.getMonth() + 1)}-${pad(tomorrow.getDate())}T12:30`;
  await act("expiry", "Expires", (form) => setField(`${form} input[name=expiresAt]`, local));
  const key = await (
    await fetch(`${api.url}/admin/v1/keys/${keyId}`, { headers: bearer(api.adminToken) })
  ).json();
  assert.equal(Date.parse(key.expiresAt), new Date(local).getTime());
  await page.click('#actions form[data-action="expiry"] [data-clear-expiry]');
  await waitForText('#actions form[data-action="expiry"] output', "No expiry");

  // Roll with no grace period: the new secret shows beside the roll, the old one stops at once.
  await act("roll", "New secret issued", async (form) => {
    await page.select(`${form} select[name=gracePeriodSeconds]`, "0");
  });
  await page.waitForSelector("#roll-secret:not([hidden])");
  const rolled = await textOf("#roll-secret .secret-value");
  assert.notEqual(rolled, secret);
  assert.equal(await page.$eval("#create-secret", (el) => el.hidden), false);
  await useKey(secret, 1, 401);
  await useKey(rolled, 1);

  // Past its 7 a minute and 10 refusals more, the key is banned: the list and the page show it.
  let banned = false;
  for (let i = 0; i < 200 && !banned; i++) {
    const res = await fetch(`${api.url}/v1/pets?limit=1`, { headers: bearer(rolled) });
    banned = res.status === 429 && (await res.json()).code === "key_banned";
  }
  assert.ok(banned, "the key was not banned");
  await setField("#filters select[name=state]", "banned");
  await setField("#filters input[name=q]", "");
  // The ban reaches D1 from the key's object right after the request that earned it.
  await page.waitForFunction(
    async (id) => {
      document.querySelector("#filters button[type=submit]").click();
      await new Promise((r) => setTimeout(r, 300));
      return document.querySelector(`#key-table tbody tr[data-key-id="${id}"]`) !== null;
    },
    { polling: 500 },
    keyId,
  );
  assert.match(
    await page.$eval(`#key-table tbody tr[data-key-id="${keyId}"]`, (tr) => tr.textContent),
    /banned.* \/ 700 /,
  );
  await openKey(keyId);
  await waitForText("#detail-now", "Banned until");
  const stateForm = '#actions form[data-action="state"]';
  await page.click(`${stateForm} [data-unban]`);
  await waitForText(`${stateForm} output`, "no longer banned");
  assert.equal(await page.$eval(`${stateForm} [data-unban]`, (b) => b.hidden), true);

  // The automatic ban is in the audit trail, by system; the filters find it.
  await setField("#audit-filters input[name=actor]", "system");
  await page.click("#load-audit");
  await page.waitForFunction(
    (id) =>
      [...document.querySelectorAll("#audit-list li")].some(
        (li) =>
          li.dataset.keyId === id && li.dataset.action === "ban" && li.dataset.actor === "system",
      ),
    {},
    keyId,
  );
  await setField("#audit-filters input[name=actor]", "");
  await setField("#audit-filters select[name=action]", "update");
  await setField("#audit-filters input[name=from]", today());
  await page.click("#load-audit");
  await page.waitForFunction(() => {
    const items = [...document.querySelectorAll("#audit-list li")];
    return items.length > 0 && items.every((li) => li.dataset.action === "update");
  });
  // Diffs read as before → after, times local with UTC on hover.
  const diffs = await page.$$eval('#detail-audit li[data-action="update"] .diff', (lists) =>
    lists.map((dl) => dl.textContent),
  );
  assert.ok(
    diffs.some((t) => t.includes(`name${keyName} → renamed-by-console`)),
    diffs.join(" | "),
  );
  assert.ok(
    diffs.some((t) => t.includes("ownerIdacct-browser → acct-other")),
    diffs.join(" | "),
  );
  assert.ok(
    diffs.some((t) => t.includes("limits300/min, 10,000/day → 7/min, 700/day")),
    diffs.join(" | "),
  );

  // Disable asks first: cancelling changes nothing; confirming refuses the key (401).
  await page.click(`${stateForm} button[type=submit]`);
  await page.waitForSelector("#confirm[open]");
  assert.match(await textOf("#confirm-text"), /^Disable renamed-by-console\?/);
  await page.click('#confirm button[value="cancel"]');
  await waitForText(`${stateForm} output`, "Not disabled");
  await page.click(`${stateForm} button[type=submit]`);
  await page.waitForSelector("#confirm[open]");
  await page.click("#confirm-button");
  await waitForText("#detail-title", "disabled");
  await useKey(rolled, 1, 401);
  await page.click(`${stateForm} button[type=submit]`);
  await waitForText("#detail-title", "active");

  // The day's usage of every key, on the page and as CSV.
  await page.click("#day-form button[type=submit]");
  await page.waitForSelector(`#day-table tbody tr[data-key-id="${keyId}"]`);
  await page.click("#download-day-csv");
  const dayCsv = await downloaded(`usage-${today()}.csv`);
  assert.match(dayCsv.split("\r\n")[0], /^"key_id","name","plan","owner_id","day","admitted",/);
  assert.ok(dayCsv.includes(keyId));

  // Revoke asks first; a revoked key offers no action.
  await page.click('#actions button[data-action="revoke"]');
  await page.waitForSelector("#confirm[open]");
  await page.click('#confirm button[value="cancel"]');
  await waitForText(`${stateForm} output`, "Not revoked");
  await page.click('#actions button[data-action="revoke"]');
  await page.waitForSelector("#confirm[open]");
  await page.click("#confirm-button");
  await waitForText("#detail-title", "revoked");
  assert.equal(await page.$eval("#actions", (el) => el.getClientRects().length), 0);
  assert.equal(await page.$eval("#no-actions", (el) => el.hidden), false);
});

test("no horizontal overflow at 390 px or 1366 px; nothing left the origin; no CSP violation", async () => {
  const other = await fetch(`${api.url}/admin/v1/keys`, {
    method: "POST",
    headers: { ...bearer(api.adminToken), "Content-Type": "application/json" },
    body: JSON.stringify({
      name: "a-key-with-a-rather-long-name-for-a-narrow-screen",
      plan: "enterprise",
      limits: { perMinute: 1_000_000, perDay: 1_250_673_000 },
      ownerId: "customer-with-a-long-account-identifier-0123456789",
      meta: { note: "x".repeat(300) },
    }),
  }).then((r) => r.json());
  await useKey(other.key, 2);
  for (const width of [1366, 390]) {
    await page.setViewport({ width, height: 900 });
    await page.goto(`${api.url}/admin`, { waitUntil: "networkidle0" });
    await page.waitForSelector("#key-table tbody tr");
    await openKey(other.id);
    await page.click("#usage-table-box summary");
    assert.equal(await overflow(), 0, `horizontal overflow at ${width} px`);
    // The chart is drawn at its real width: its text keeps its size.
    const chartWidth = await page.$eval("#usage-chart", (s) => s.getBoundingClientRect().width);
    const viewBoxWidth = await page.$eval("#usage-chart", (s) => s.viewBox.baseVal.width);
    assert.ok(Math.abs(chartWidth - viewBoxWidth) <= 1, `${chartWidth} vs ${viewBoxWidth}`);
    if (SCREENSHOTS)
      await page.screenshot({
        path: path.join(SCREENSHOTS, `console-${width}.png`),
        fullPage: true,
      });
  }

  const origin = new URL(api.url).origin;
  assert.ok(requests.length >= 20, `only ${requests.length} requests seen`);
  // data: URLs are the browser's own (the date inputs' icons), not requests to anyone.
  const elsewhere = requests.filter(
    (url) => !url.startsWith("data:") && new URL(url).origin !== origin,
  );
  assert.deepEqual(elsewhere, []);
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
  assert.ok(!requests.some((url) => url.includes(api.adminToken)), "the token was in a URL");
  // The wrong-token login's 401 is the only failed response (and console error).
  assert.deepEqual(failedResponses, ["401 /admin/v1/whoami"]);
  assert.equal(
    consoleErrors.filter((text) => !/status of 401/.test(text)).length,
    0,
    consoleErrors.join("\n"),
  );

  // Logging out forgets the token.
  await page.click("#logout");
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  assert.equal(await page.$eval("#login", (el) => el.hidden), false);
});

test("the page's script, styles and icon are static files of this origin, with the page's security headers", async () => {
  const pageHeaders = (await fetch(`${api.url}/admin`)).headers;
  const SECURITY_HEADERS = [
    "Content-Security-Policy",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "X-Frame-Options",
    "Cache-Control",
  ];
  for (const name of SECURITY_HEADERS) assert.ok(pageHeaders.get(name), `the page has no ${name}`);
  const FILES = [
    ["/admin/console.js", /^text\/javascript/, "public/admin/console.js"],
    ["/admin/console.css", /^text\/css/, "public/admin/console.css"],
    ["/admin/favicon.svg", /^image\/svg\+xml/, "public/admin/favicon.svg"],
  ];
  for (const [urlPath, type, file] of FILES) {
    const res = await fetch(`${api.url}${urlPath}`);
    assert.equal(res.status, 200, urlPath);
    assert.match(res.headers.get("Content-Type") ?? "", type, urlPath);
    for (const name of SECURITY_HEADERS)
      assert.equal(res.headers.get(name), pageHeaders.get(name), `${urlPath}: ${name}`);
    // Workers Static Assets answers with the file as it is in public/ (and an ETag, which the
    // Worker's own responses do not carry).
    assert.equal(await res.text(), readFileSync(path.join(ROOT, file), "utf8"), urlPath);
    assert.ok(res.headers.get("ETag"), `${urlPath}: no ETag, so not from the static assets`);
  }
});
