import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { clock } from "../clock";
import { ApiError } from "../errors";
import { ExpiringMap } from "../expiring-map";
import { rateLimitHeaders } from "../quota/headers";
import type { Decision, WindowStatus } from "../quota/windows";

/**
 * The Worker's side of the failed-authentication shield (the AuthShield Durable Object counts).
 * A client is its IP address; IPv6 clients by their /64, since one host can use any address in it.
 */
export function clientAddress(c: Context): string {
  const ip = c.req.header("CF-Connecting-IP") ?? "127.0.0.1";
  if (!ip.includes(":")) return ip;
  const mapped = ip.match(/^(?:::ffff:|(?:0{1,4}:){5}ffff:)(\d{1,3}(?:\.\d{1,3}){3})$/i);
  if (mapped) return mapped[1]!; // an IPv4 client written as IPv6
  const [head = "", tail = ""] = ip.split("::");
  const parts = (s: string) => s.split(":").filter(Boolean);
  const groups = ip.includes("::") ? [...parts(head), ...Array(Math.max(0, 8 - parts(head).length - parts(tail).length)).fill("0"), ...parts(tail)] : parts(ip);
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return ip.toLowerCase();
  return `${groups.slice(0, 4).map((g) => g.toLowerCase().replace(/^0+(?=.)/, "")).join(":")}::/64`;
}

// Clients refused in this isolate, with the full window their shield object refused them for.
// They are answered here, without a call to the object or a D1 lookup, so a guessing client
// costs almost nothing.
const refused = new ExpiringMap<string, WindowStatus>(10_000);

export function isRefused(shieldName: string, now = clock.now()): boolean {
  return refused.get(shieldName, now) !== undefined;
}

function refusal(decision: Decision): ApiError {
  return new ApiError("rate_limited", "Too many failed authentication attempts from this client; wait for Retry-After.", rateLimitHeaders(decision));
}

/**
 * The error for a failed authentication: 401, or 429 once this client has failed too often in
 * this minute. Either carries the X-RateLimit-* headers of the client's failure window.
 */
export async function authFailure(c: Context<AppEnv>, shieldName: string, message: string, challenge: string): Promise<ApiError> {
  const now = clock.now();
  const window = refused.get(shieldName, now);
  if (window) return refusal({ outcome: "rate_limited", retryAt: window.resetAt, now, windows: [window] });
  try {
    const decision = await c.env.AUTH_SHIELD.getByName(shieldName).recordFailure();
    if (decision.outcome !== "allowed") {
      const window = decision.windows[0]!;
      refused.set(shieldName, window, window.resetAt);
      return refusal(decision);
    }
    return new ApiError("unauthorized", message, { ...rateLimitHeaders(decision), "WWW-Authenticate": challenge });
  } catch (err) {
    console.warn(JSON.stringify({ level: "warn", msg: "auth shield unreachable; failing open", error: String(err) }));
    return new ApiError("unauthorized", message, { "WWW-Authenticate": challenge });
  }
}
