import { env, exports } from "cloudflare:workers";
import { afterEach, beforeEach, vi } from "vitest";
import { clock } from "../src/clock";
import type { Plan } from "../src/quota/plans";

export const ADMIN = { Authorization: `Bearer ${env.ADMIN_TOKEN}` };
export const BASE = "https://api.example.com";

export function call(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(`${BASE}${path}`, init);
}

export function auth(key: string, headers: Record<string, string> = {}): Record<string, string> {
  return { Authorization: `Bearer ${key}`, ...headers };
}

export function postJson(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return call(path, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
}

export interface IssuedKey {
  id: string;
  key: string;
  plan: Plan;
  limits: { perMinute: number; perDay: number };
}

/** Issues a key through the admin API, as an operator would. */
export async function issueKey(plan: Plan = "pro", limits?: { perMinute: number; perDay: number }, extra: Record<string, unknown> = {}): Promise<IssuedKey> {
  const res = await postJson("/admin/v1/keys", { name: `test-${plan}`, plan, ...(limits ? { limits } : {}), ...extra }, ADMIN);
  if (res.status !== 201) throw new Error(`issuing a key failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as IssuedKey;
}

export async function createPets(key: string, pets: Array<{ name: string; categoryId: number; status?: string }>): Promise<Array<{ id: number }>> {
  const out = [];
  for (const pet of pets) {
    const res = await postJson("/v1/pets", pet, auth(key));
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
    out.push((await res.json()) as { id: number });
  }
  return out;
}

export async function expectError(res: Response, status: number, code: string): Promise<{ code: string; message: string; status: number }> {
  const body = (await res.json()) as { code: string; message: string; status: number };
  if (res.status !== status || body.code !== code || body.status !== status || typeof body.message !== "string") {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${JSON.stringify(body)}`);
  }
  if (!res.headers.get("Content-Type")?.startsWith("application/json")) throw new Error("error without application/json");
  return body;
}

/** 2030-06-10T10:20:00Z: minute-aligned, in the future (so fake-time alarms never fire), before getPet's sunset. */
export const T0 = Date.UTC(2030, 5, 10, 10, 20, 0);

/**
 * Mocks the service clock for every test of the calling file, from `start`; move it with
 * `time.now = …` or `time.now += …`. The Durable Objects see it too (same isolate).
 */
export function mockClock(start: number): { now: number } {
  const time = { now: start };
  beforeEach(() => {
    time.now = start;
    vi.spyOn(clock, "now").mockImplementation(() => time.now);
  });
  afterEach(() => vi.restoreAllMocks());
  return time;
}
