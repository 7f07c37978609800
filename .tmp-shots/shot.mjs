import puppeteer from "puppeteer-core";
import { readFileSync } from "node:fs";
const { url, adminToken } = JSON.parse(readFileSync("/tmp/console-eng/serve.out", "utf8").split("\n")[0]);
const H = { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" };
async function issue(name, plan, extra = {}) {
  const r = await fetch(`${url}/admin/v1/keys`, { method: "POST", headers: H, body: JSON.stringify({ name, plan, ...extra }) });
  return r.json();
}
if (process.argv[2] === "seed") {
  const a = await issue("billing-sync", "pro", { ownerId: "acct-42", meta: { team: "billing" } });
  const b = await issue("mobile-app", "enterprise", { limits: { perMinute: 3, perDay: 5000 }, ownerId: "acct-7" });
  await issue("never-used", "free");
  for (let i = 0; i < 40; i++) await fetch(`${url}/v1/pets?limit=1`, { headers: { Authorization: `Bearer ${a.key}` } });
  for (let i = 0; i < 16; i++) await fetch(`${url}/v1/pets?limit=1`, { headers: { Authorization: `Bearer ${b.key}` } });
  console.log(a.id, b.id);
  process.exit(0);
}
const browser = await puppeteer.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
const page = await browser.newPage();
const errors = [];
page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
page.on("pageerror", (e) => errors.push(String(e)));
for (const width of [1366, 390]) {
  await page.setViewport({ width, height: 900 });
  await page.goto(`${url}/admin`, { waitUntil: "networkidle0" });
  if (await page.$eval("#app", (e) => e.hidden)) {
    await page.type("#token", adminToken);
    await page.click("#login-form button[type=submit]");
  }
  await page.waitForSelector("#key-table tbody tr");
  const rows = await page.$$("#key-table tbody tr");
  await rows[process.argv[3] ? Number(process.argv[3]) : 0].click();
  await page.waitForSelector("#usage-chart .x-axis text");
  await new Promise((r) => setTimeout(r, 500));
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  console.log(width, "overflow", overflow);
  await page.screenshot({ path: `/tmp/console-eng/shot-${width}.png`, fullPage: true });
  if (width === 390) {
    for (const sel of ["#keys", "#usage-figure", "#actions", "#audit"]) {
      const h = await page.$(sel);
      await h.screenshot({ path: `/tmp/console-eng/el-${sel.slice(1)}.png` });
    }
  }
}
console.log("errors", errors);
await browser.close();
