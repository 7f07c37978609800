// @ts-check
// The operator console in a real headless browser: Debian's chromium driven by puppeteer-core
// (which never downloads a browser), against the Worker under `wrangler dev`. Run with
// `npm run test:e2e -- e2e/console.browser.test.mjs`; CHROMIUM overrides the browser path
// (default /usr/bin/chromium). CONSOLE_SCREENSHOTS=<dir> also saves a full-page screenshot of
// every view at 1366 px and 390 px, light and dark, there.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { ROOT, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";
import { waitForRoomInDay } from "./helpers.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;
const STEP_MS = 15_000;
// A laptop's screen, and a phone's.
const WIDE = { width: 1366, height: 768 };
const PHONE = { width: 390, height: 844 };

let api;
let browser;
let page;
let downloads;
const requests = [];
const failedResponses = [];
const consoleErrors = [];

before(async () => {
  // Free ports, so that no other server (npm run dev, another test run) answers in its place.
  api = await startApiOnFreePorts({ localObservability: false });
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
  await page.setViewport(WIDE);
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
  if (SCREENSHOTS) mkdirSync(SCREENSHOTS, { recursive: true });
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

/** Issues a key through the admin API (not the page). */
async function issueKey(body) {
  const res = await fetch(`${api.url}/admin/v1/keys`, {
    method: "POST",
    headers: { ...bearer(api.adminToken), "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return res.json();
}

const textOf = (selector) => page.$eval(selector, (el) => el.textContent ?? "");
const today = () => new Date().toISOString().slice(0, 10);
/** The current UTC minute window's start, in ms (the quota's minute window is aligned to it). */
const minuteWindow = () => Math.floor(Date.now() / 60_000) * 60_000;
const pathAndQuery = () => {
  const url = new URL(page.url());
  return url.pathname + url.search;
};

/** Waits for the next UTC minute when fewer than `seconds` are left in this one. */
async function waitForRoomInMinute(seconds) {
  const left = minuteWindow() + 60_000 - Date.now();
  if (left < seconds * 1000) await new Promise((r) => setTimeout(r, left + 50));
}

/** Waits until `selector`'s text includes `text`. */
function waitForText(selector, text) {
  return page.waitForFunction(
    (s, t) => document.querySelector(s)?.textContent?.includes(t),
    {},
    selector,
    text,
  );
}

/** Waits until the page shows `view` (keys, new, key, usage, audit) with what it loads drawn. */
function waitForView(view) {
  return page.waitForFunction(
    (v) =>
      document.body.dataset.view === v &&
      !document.querySelector("#app")?.hasAttribute("aria-busy") &&
      !(
        /** @type {HTMLElement | null} */ (document.querySelector(`#app > [data-view="${v}"]`))
          ?.hidden
      ),
    {},
    view,
  );
}

/** Opens a console URL (a new page load) and waits for its view. */
async function visit(urlPath, view) {
  await page.goto(`${api.url}${urlPath}`, { waitUntil: "networkidle0" });
  await waitForView(view);
}

/** Waits until the key page shows key `id`, drawn (not busy) with its usage chart. */
function waitForKey(id) {
  return page.waitForFunction(
    (k) =>
      document.body.dataset.view === "key" &&
      /** @type {HTMLElement | null} */ (document.querySelector("#detail"))?.dataset.keyId === k &&
      !document.querySelector("#detail")?.hasAttribute("aria-busy") &&
      !document.querySelector("#app")?.hasAttribute("aria-busy") &&
      document.querySelectorAll("#usage-chart g.day").length > 0,
    {},
    id,
  );
}

/**
 * Submits the open key's action form `action` (after `fill`, given the form's selector), and
 * waits for its result text.
 * @param {string} action
 * @param {string} expected
 * @param {(form: string) => Promise<void>} [fill]
 */
async function act(action, expected, fill = async () => {}) {
  const form = `#actions form[data-action="${action}"]`;
  await page.$eval(`${form} output`, (o) => {
    o.textContent = "";
  });
  await fill(form);
  await page.click(`${form} button[type=submit]`);
  await waitForText(`${form} output`, expected).catch(async (err) => {
    // Says what the page said instead (an API error, another result), not only "timed out".
    const said = await textOf(`${form} output`);
    throw new Error(`${action}: expected "${expected}", the page said "${said}"`, { cause: err });
  });
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

/** Whether `selector` is laid out (not display: none, itself or through an ancestor). */
const shown = (selector) =>
  page.$eval(selector, (el) => el.getClientRects().length > 0).catch(() => false);

let keyId;
let keyName;
let secret;

test("logged out, any view's URL asks for the token and shows that view after; with no keys, the views say so", async () => {
  const response = await page.goto(`${api.url}/admin`, { waitUntil: "networkidle0" });
  assert.equal(response.status(), 200);
  assert.match(response.headers()["content-security-policy"], /^default-src 'self'/);
  // /admin is the key list: the address bar says so.
  assert.equal(pathAndQuery(), "/admin/keys");

  // Logged out: only the login form shows. A wrong token is refused with the API's message.
  assert.equal(await page.$eval("#app", (el) => el.hidden), true);
  assert.equal(await shown("#nav"), false);
  await page.type("#token", "not-the-admin-token");
  await page.click("#login-form button[type=submit]");
  await page.waitForFunction(() =>
    document.querySelector("#login .hint")?.textContent?.startsWith("Not accepted"),
  );
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);

  // A bookmarked audit view with its filter: after logging in, that view, filtered.
  await page.goto(`${api.url}/admin/audit?actor=nobody`, { waitUntil: "networkidle0" });
  await page.type("#token", api.adminToken);
  await page.click("#login-form button[type=submit]");
  await waitForView("audit");
  assert.equal(pathAndQuery(), "/admin/audit?actor=nobody");
  assert.equal(await page.$eval("#audit-filters input[name=actor]", (i) => i.value), "nobody");
  assert.equal(await shown("#no-audit"), true);
  assert.equal(await shown("#clear-audit-filters"), true);
  assert.equal(await page.evaluate(() => document.cookie), "");
  assert.ok(!page.url().includes(api.adminToken));
  assert.match(await textOf("#whoami"), /admin/);
  assert.equal(
    await page.$eval('#nav a[aria-current="page"]', (a) => a.getAttribute("href")),
    "/admin/audit",
  );

  // The navigation moves between the views, each at its own URL; Back goes back.
  await page.click('#nav a[data-nav="keys"]');
  await waitForView("keys");
  assert.equal(pathAndQuery(), "/admin/keys");
  assert.equal(await shown("#first-key"), true, "no keys yet: the first-key empty state");
  assert.equal(await shown("#key-table"), false);
  await page.click('#nav a[data-nav="usage"]');
  await waitForView("usage");
  assert.equal(pathAndQuery(), "/admin/usage");
  assert.equal(await page.$eval("#day-form input[name=day]", (i) => i.value), today());
  assert.match(
    await textOf("#day-summary"),
    new RegExp(`^${today()} so far, as of \\d\\d:\\d\\d UTC`),
  );
  assert.equal(await shown("#no-day-usage"), true);
  await page.goBack();
  await waitForView("keys");
  assert.equal(pathAndQuery(), "/admin/keys");
  assert.equal(
    await page.$eval('#nav a[aria-current="page"]', (a) => a.textContent.trim()),
    "Keys",
  );
});

test("an operator creates a key on its own page and sees who uses what: today's share, last used, the chart and its numbers", async () => {
  // What it reads back as "today" (the share, the chart, the CSV) was counted today: the test
  // runs within one UTC day.
  await waitForRoomInDay(180);
  await page.click("#first-key a.button");
  await waitForView("new");
  assert.equal(pathAndQuery(), "/admin/keys/new");

  // Create a key: its page opens, with the secret shown once.
  const name = `browser-${Date.now()}`;
  keyName = name;
  await page.type("#create-form input[name=name]", name);
  await page.select("#create-form select[name=plan]", "pro");
  await page.type("#create-form input[name=ownerId]", "acct-browser");
  await page.select("#create-form select[name=region]", "weur");
  await page.click("#create-form button[type=submit]");
  await page.waitForSelector("#create-secret:not([hidden])");
  keyId = await page.$eval("#detail", (d) => d.dataset.keyId);
  assert.match(keyId, /^key_[0-9A-Za-z]{20}$/);
  await waitForKey(keyId);
  assert.equal(pathAndQuery(), `/admin/keys/${keyId}`);
  secret = await textOf("#create-secret .secret-value");
  assert.match(secret, /^pet_test_[0-9A-Za-z]{43}_[0-9A-Za-z]{20}_[0-9a-f]{32}$/);
  // The header: its name, state and plan.
  assert.equal(await textOf("#detail-title"), name);
  assert.deepEqual(await page.$$eval("#detail-badges .badge", (b) => b.map((x) => x.textContent)), [
    "active",
    "pro",
  ]);
  // A brand-new key: the chart says so instead of showing a blank box.
  await page.waitForSelector("#usage-figure.empty");
  assert.match(await textOf("#usage-summary"), /^No usage yet/);
  assert.equal(await textOf("#usage-chart .empty-text"), "No usage yet");

  // Use the key, then find it in the list by the start of its secret: today's share and last
  // used show. The start of a secret never goes into the URL.
  // The three requests and the key page below fall in one UTC minute window (the page shows
  // "this minute" as of its draw); the steps between take well under 45 s.
  await waitForRoomInMinute(45);
  const usedInMinute = minuteWindow();
  await useKey(secret, 3);
  assert.equal(minuteWindow(), usedInMinute, "the three requests spanned a minute boundary");
  await page.click('#nav a[data-nav="keys"]');
  await waitForView("keys");
  await setField("#filters input[name=q]", secret.slice(0, 20));
  // Permits leased to the Worker's isolate count as used until they come back (within seconds),
  // so the list is asked again until it shows exactly the 3 requests.
  await page.waitForFunction(
    async (id) => {
      /** @type {HTMLButtonElement} */ (
        document.querySelector("#filters button[type=submit]")
      ).click();
      await new Promise((r) => setTimeout(r, 300));
      const rows = /** @type {NodeListOf<HTMLTableRowElement>} */ (
        document.querySelectorAll("#key-table tbody tr")
      );
      return (
        rows.length === 1 &&
        rows[0].dataset.keyId === id &&
        rows[0].textContent?.includes("3 / 10K")
      );
    },
    { polling: 500 },
    keyId,
  );
  assert.equal(pathAndQuery(), "/admin/keys");
  assert.ok(!page.url().includes("pet_test"), "the secret's start went into the URL");
  const cells = await page.$$eval(`#key-table tbody tr[data-key-id="${keyId}"] td`, (tds) =>
    Object.fromEntries(tds.map((td) => [td.dataset.label, td.textContent])),
  );
  assert.equal(cells["Last used"], today());
  assert.match(cells.Today, /^3 \/ 10K \(0\.03%\)$/);
  assert.equal(cells.State, "active");
  assert.match(cells.Name, new RegExp(`^${name}${keyId}$`));
  assert.match(await textOf("#keys-as-of"), /so far today \(UTC\), as of \d\d:\d\d UTC/);

  // Filters are in the URL: a reload shows the same list.
  await page.select("#filters select[name=plan]", "pro");
  await setField("#filters input[name=q]", "");
  await page.click("#filters button[type=submit]");
  await waitForView("keys");
  assert.equal(pathAndQuery(), "/admin/keys?plan=pro");
  await visit("/admin/keys?plan=pro&ownerId=acct-browser", "keys");
  assert.equal(await page.$eval("#filters select[name=plan]", (s) => s.value), "pro");
  assert.equal(await page.$eval("#filters input[name=ownerId]", (s) => s.value), "acct-browser");
  assert.deepEqual(
    await page.$$eval("#key-table tbody tr", (rows) => rows.map((r) => r.dataset.keyId)),
    [keyId],
  );

  // A click on the row opens the key at its URL: axes with dates and a scale, a legend, today
  // marked, and the numbers of the usage API.
  await page.click(`#key-table tbody tr[data-key-id="${keyId}"] td[data-label="Plan"]`);
  await waitForKey(keyId);
  assert.equal(pathAndQuery(), `/admin/keys/${keyId}`);
  assert.equal(await shown("#create-secret"), false, "the secret shows once, not again");
  await waitForText("#usage-summary", "3 admitted");
  assert.match(
    await textOf("#usage-summary"),
    /Today so far \(as of \d\d:\d\d UTC\): 3 admitted, 0 refused\.$/,
  );
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
  // The minute and the day, live from the key's object and said to be so (checked after the
  // read, so the draw was within the requests' minute window too).
  const figures = await page.$$eval("#detail-now .stat", (stats) =>
    stats.map((s) => [s.querySelector("dt").textContent, s.querySelector("dd").textContent]),
  );
  assert.equal(
    minuteWindow(),
    usedInMinute,
    `the minute ended ${Date.now() - usedInMinute - 60_000} ms before the read`,
  );
  assert.deepEqual(figures[0], ["This minute", "3 of 300"]);
  assert.match(figures[1][0], /^Today so far, as of \d\d:\d\d UTC$/);
  assert.equal(figures[1][1], "3 of 10,000");
  // Times are local, with UTC on hover.
  assert.match(
    await page.$eval("#detail-fields time", (t) => t.getAttribute("title")),
    /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/,
  );

  // Ranges of 7 and 90 days, each in the URL (a reload keeps it).
  for (const days of [7, 90]) {
    await page.click(`#usage-range input[value="${days}"]`);
    await page.waitForFunction(
      (n) => document.querySelectorAll("#usage-chart g.day").length === n,
      {},
      days,
    );
    assert.equal(pathAndQuery(), `/admin/keys/${keyId}?days=${days}`);
    assert.equal((await chartDays()).at(-1).admitted, 3);
  }
  await visit(`/admin/keys/${keyId}?days=90`, "key");
  await waitForKey(keyId);
  assert.equal((await chartDays()).length, 90);

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

test("every CLI action works from the key page, with its result beside it; revoked keys offer none", async () => {
  // Its audit filter and the day's usage read "today": the test runs within one UTC day.
  await waitForRoomInDay(180);
  await visit(`/admin/keys/${keyId}`, "key");
  await waitForKey(keyId);

  await act("rename", "Renamed to renamed-by-console", (form) =>
    setField(`${form} input[name=name]`, "renamed-by-console"),
  );
  await waitForText("#detail-title", "renamed-by-console");
  assert.equal(await textOf("#crumb-key"), "renamed-by-console");

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
  await waitForText("#detail-badges", "enterprise");

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
  await useKey(secret, 1, 401);
  await useKey(rolled, 1);

  // Past its 7 a minute and 10 refusals more, the key is banned: the list and the page show it.
  let banned = false;
  for (let i = 0; i < 200 && !banned; i++) {
    const res = await fetch(`${api.url}/v1/pets?limit=1`, { headers: bearer(rolled) });
    banned = res.status === 429 && (await res.json()).code === "key_banned";
  }
  assert.ok(banned, "the key was not banned");
  // The ban reaches D1 from the key's object right after the request that earned it.
  await visit("/admin/keys?state=banned", "keys");
  await page.waitForFunction(
    async (id) => {
      /** @type {HTMLButtonElement} */ (
        document.querySelector("#filters button[type=submit]")
      ).click();
      await new Promise((r) => setTimeout(r, 300));
      return document.querySelector(`#key-table tbody tr[data-key-id="${id}"]`) !== null;
    },
    { polling: 500 },
    keyId,
  );
  assert.equal(pathAndQuery(), "/admin/keys?state=banned");
  assert.match(
    await page.$eval(`#key-table tbody tr[data-key-id="${keyId}"]`, (tr) => tr.textContent),
    /banned.* \/ 700 /,
  );
  await page.click(`#key-table tbody tr[data-key-id="${keyId}"] .name a`);
  await waitForKey(keyId);
  await waitForText("#detail-badges", "banned");
  assert.match((await textOf("#detail-now")).replace(/\s+/g, " "), /Banned until/);
  const stateForm = '#actions form[data-action="state"]';
  await page.click(`${stateForm} [data-unban]`);
  await waitForText(`${stateForm} output`, "no longer banned");
  assert.equal(await page.$eval(`${stateForm} [data-unban]`, (b) => b.hidden), true);

  // The key's own audit trail, its latest entries; "All entries" opens the audit view for it.
  assert.equal(
    await page.$eval("#detail-audit li", (li) => li.dataset.action),
    "unban",
    "newest first",
  );
  await page.click("#detail-audit-all");
  await waitForView("audit");
  assert.equal(pathAndQuery(), `/admin/audit?keyId=${keyId}`);
  const actions = await page.$$eval("#audit-list li", (items) =>
    items.map((li) => li.dataset.action),
  );
  assert.equal(actions.at(-1), "create");
  assert.ok(actions.includes("ban") && actions.includes("roll"), actions.join(","));
  // Diffs read as before → after, times local with UTC on hover.
  const diffs = await page.$$eval('#audit-list li[data-action="update"] .diff', (lists) =>
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

  // The automatic ban is in the audit trail, by system; the filters find it and go in the URL.
  await setField("#audit-filters input[name=keyId]", "");
  await setField("#audit-filters input[name=actor]", "system");
  await page.click("#load-audit");
  await waitForView("audit");
  assert.equal(pathAndQuery(), "/admin/audit?actor=system");
  assert.ok(
    await page.$$eval(
      "#audit-list li",
      (items, id) =>
        items.some(
          (li) =>
            li.dataset.keyId === id && li.dataset.action === "ban" && li.dataset.actor === "system",
        ),
      keyId,
    ),
  );
  await visit(`/admin/audit?action=update&from=${today()}`, "audit");
  assert.equal(await page.$eval("#audit-filters select[name=action]", (s) => s.value), "update");
  const listed = await page.$$eval("#audit-list li", (items) =>
    items.map((li) => li.dataset.action),
  );
  assert.ok(listed.length > 0 && listed.every((a) => a === "update"), listed.join(","));

  // Back on the key: disable asks first; cancelling changes nothing; confirming refuses the key.
  await visit(`/admin/keys/${keyId}`, "key");
  await waitForKey(keyId);
  await page.click(`${stateForm} button[type=submit]`);
  await page.waitForSelector("#confirm[open]");
  assert.match(await textOf("#confirm-text"), /^Disable renamed-by-console\?/);
  await page.click('#confirm button[value="cancel"]');
  await waitForText(`${stateForm} output`, "Not disabled");
  await page.click(`${stateForm} button[type=submit]`);
  await page.waitForSelector("#confirm[open]");
  await page.click("#confirm-button");
  await waitForText("#detail-badges", "disabled");
  await useKey(rolled, 1, 401);
  await page.click(`${stateForm} button[type=submit]`);
  await waitForText("#detail-badges", "active");

  // Revoke asks first; a revoked key offers no action.
  await page.click('#actions button[data-action="revoke"]');
  await page.waitForSelector("#confirm[open]");
  await page.click('#confirm button[value="cancel"]');
  await waitForText(`${stateForm} output`, "Not revoked");
  await page.click('#actions button[data-action="revoke"]');
  await page.waitForSelector("#confirm[open]");
  await page.click("#confirm-button");
  await waitForText("#detail-badges", "revoked");
  assert.equal(await shown("#actions"), false);
  assert.equal(await page.$eval("#no-actions", (el) => el.hidden), false);
});

test("today's usage of every key is live and said to be the day so far; a finished day is final", async () => {
  await waitForRoomInDay(180);
  // A key that served requests and whose own usage nobody has read: today's totals come from
  // its quota object, not from what D1 has heard of.
  const quiet = await issueKey({ name: "served-unread", plan: "free" });
  await useKey(quiet.key, 4);
  await page.click('#nav a[data-nav="usage"]');
  await waitForView("usage");
  await page.waitForFunction(
    async (id) => {
      /** @type {HTMLButtonElement} */ (
        document.querySelector("#day-form button[type=submit]")
      ).click();
      await new Promise((r) => setTimeout(r, 300));
      const row = document.querySelector(`#day-table tbody tr[data-key-id="${id}"]`);
      return row?.querySelector('td[data-label="Admitted"]')?.textContent === "4";
    },
    { polling: 500 },
    quiet.id,
  );
  assert.equal(pathAndQuery(), `/admin/usage?day=${today()}`);
  const asOf = await page.$eval("#day-summary", (p) => p.dataset.asOf);
  assert.ok(Math.abs(Date.parse(asOf) - Date.now()) < 60_000, asOf);
  assert.match(
    await textOf("#day-summary"),
    new RegExp(`^${today()} so far, as of ${asOf.slice(11, 16)} UTC: the day is not over`),
  );
  // The foot adds the rows up.
  const admittedCells = await page.$$eval('#day-table tbody td[data-label="Admitted"]', (tds) =>
    tds.map((td) => Number(td.textContent.replace(/\D/g, ""))),
  );
  assert.equal(
    await textOf('#day-table tfoot td[data-label="Admitted"]'),
    admittedCells.reduce((a, b) => a + b, 0).toLocaleString(),
  );
  // The day's CSV says in its name that it is the day so far.
  await page.click("#download-day-csv");
  const dayCsv = await downloaded(`usage-${today()}-so-far.csv`);
  assert.match(dayCsv.split("\r\n")[0], /^"key_id","name","plan","owner_id","day","admitted",/);
  assert.ok(dayCsv.includes(`"${quiet.id}","served-unread","free","","${today()}","4",`));
  assert.match(await textOf("#day-form output"), /so far, as of \d\d:\d\d UTC/);

  // Yesterday is over: final, and no key existed then.
  const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
  await setField("#day-form input[name=day]", yesterday);
  await page.click("#day-form button[type=submit]");
  await waitForView("usage");
  assert.equal(pathAndQuery(), `/admin/usage?day=${yesterday}`);
  assert.equal(await textOf("#day-summary"), `${yesterday} (UTC), final: 0 admitted.`);
  assert.equal(await shown("#no-day-usage"), true);
  assert.equal(await shown("#day-table"), false);
});

/** The background's relative luminance (0 black … 1 white). */
const backgroundLuminance = () =>
  page.evaluate(() => {
    const channels = getComputedStyle(document.documentElement).backgroundColor.match(/\d+/g);
    const [r, g, b] = /** @type {RegExpMatchArray} */ (channels).map(Number).map((v) => {
      const c = v / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  });

test("every view at 1366 px and 390 px, light and dark: nothing overflows, the key list and a key page fit in two screens", async () => {
  const long = await issueKey({
    name: "a-key-with-a-rather-long-name-for-a-narrow-screen",
    plan: "enterprise",
    limits: { perMinute: 1_000_000, perDay: 1_250_673_000 },
    ownerId: "customer-with-a-long-account-identifier-0123456789",
    meta: { note: "x".repeat(300) },
  });
  await useKey(long.key, 2);
  // A list of a realistic size: a full page of the key list (20 keys, then "Show more") must fit.
  const made = [long];
  for (let i = made.length; i < 25; i++)
    made.push(await issueKey({ name: `tenant-${String(i).padStart(2, "0")}`, plan: "pro" }));
  await useKey(made[3].key, 5);

  const VIEWS = [
    { name: "keys", url: "/admin/keys", view: "keys", screens: 2 },
    { name: "key", url: `/admin/keys/${long.id}`, view: "key", screens: 2 },
    { name: "keys-no-match", url: "/admin/keys?ownerId=nobody", view: "keys" },
    { name: "new-key", url: "/admin/keys/new", view: "new" },
    { name: "usage", url: "/admin/usage", view: "usage" },
    { name: "audit", url: "/admin/audit", view: "audit" },
  ];
  const problems = [];
  for (const scheme of ["light", "dark"]) {
    await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: scheme }]);
    for (const viewport of [WIDE, PHONE]) {
      await page.setViewport(viewport);
      for (const { name, url, view, screens } of VIEWS) {
        await visit(url, view);
        if (view === "key") await waitForKey(long.id);
        const where = `${name} at ${viewport.width} px, ${scheme}`;
        const size = await page.evaluate(() => ({
          scrollWidth: /** @type {Element} */ (document.scrollingElement).scrollWidth,
          scrollHeight: /** @type {Element} */ (document.scrollingElement).scrollHeight,
          innerWidth,
          innerHeight,
        }));
        if (view === "key") {
          // Opened, the usage table fits the width too (it scrolls within its box).
          await page.click("#usage-table-box summary");
          const width = await page.evaluate(
            () => /** @type {Element} */ (document.scrollingElement).scrollWidth,
          );
          if (width > size.innerWidth) problems.push(`the usage table overflows: ${where}`);
          await page.click("#usage-table-box summary");
        }
        // Every view is looked at (and photographed) before the test fails on one.
        if (size.scrollWidth > size.innerWidth)
          problems.push(`horizontal overflow: ${where} (${size.scrollWidth} px)`);
        if (screens && viewport === WIDE && size.scrollHeight > screens * size.innerHeight)
          problems.push(`${where} is ${size.scrollHeight} px high, over ${screens} screens`);
        const luminance = await backgroundLuminance();
        if (scheme === "dark") assert.ok(luminance < 0.05, `${where}: background ${luminance}`);
        else assert.ok(luminance > 0.8, `${where}: background ${luminance}`);
        if (view === "key") {
          // The chart is drawn at its real width: its text keeps its size.
          const chartWidth = await page.$eval(
            "#usage-chart",
            (s) => s.getBoundingClientRect().width,
          );
          const viewBoxWidth = await page.$eval("#usage-chart", (s) => s.viewBox.baseVal.width);
          assert.ok(Math.abs(chartWidth - viewBoxWidth) <= 1, `${chartWidth} vs ${viewBoxWidth}`);
        }
        if (SCREENSHOTS) {
          await page.evaluate(() => window.scrollTo(0, 0));
          await page.screenshot({
            path: path.join(SCREENSHOTS, `${name}-${viewport.width}-${scheme}.png`),
            fullPage: true,
          });
        }
      }
    }
  }

  // The login form and the home page, which links to each surface.
  await page.evaluate(() => sessionStorage.clear());
  for (const scheme of ["light", "dark"]) {
    await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: scheme }]);
    for (const viewport of [WIDE, PHONE]) {
      await page.setViewport(viewport);
      for (const [name, url] of [
        ["login", "/admin/keys"],
        ["home", "/"],
      ]) {
        await page.goto(`${api.url}${url}`, { waitUntil: "networkidle0" });
        const overflow = await page.evaluate(
          () => /** @type {Element} */ (document.scrollingElement).scrollWidth - innerWidth,
        );
        if (overflow > 0) problems.push(`horizontal overflow: ${name} at ${viewport.width} px`);
        if (SCREENSHOTS)
          await page.screenshot({
            path: path.join(SCREENSHOTS, `${name}-${viewport.width}-${scheme}.png`),
            fullPage: true,
          });
      }
    }
  }
  assert.deepEqual(problems, []);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  assert.deepEqual(
    await page.$$eval(".surfaces a", (links) => links.map((a) => a.getAttribute("href"))),
    [
      "/docs",
      "/v1/openapi.json",
      "/admin/keys",
      "/admin/usage",
      "/admin/audit",
      "/admin/webhooks",
      "/admin/docs",
    ],
  );
  assert.match(
    await page.evaluate(() => getComputedStyle(document.body).fontFamily),
    /system-ui/,
    "the home page has the console's styles",
  );
  await page.setViewport(WIDE);
});

test("nothing left the origin, no CSP violation, the token in no URL; logging out forgets it", async () => {
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
  await page.evaluate(
    (token) => sessionStorage.setItem("animal-store-admin-token", token),
    api.adminToken,
  );
  await visit("/admin/keys", "keys");
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
  const FILES = /** @type {Array<[string, RegExp, string]>} */ ([
    ["/admin/console.js", /^text\/javascript/, "public/admin/console.js"],
    ["/admin/console.css", /^text\/css/, "public/admin/console.css"],
    ["/admin/favicon.svg", /^image\/svg\+xml/, "public/admin/favicon.svg"],
  ]);
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
