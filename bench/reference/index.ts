// A do-nothing reference Worker for `npm run bench`: the API's pet routes with fixed bodies and
// the same kind of headers (rate limit, request id, Server-Timing, deprecation), no bindings,
// no authentication, no storage. Whatever the API is slower than this, it spends on its own work.

const STATUSES = ["available", "pending", "sold"] as const;
const PETS = Array.from({ length: 20 }, (_, i) => ({
  id: i + 1,
  name: `Pet ${i + 1}`,
  categoryId: (i % 5) + 1,
  status: STATUSES[i % 3],
}));
const PAGE = JSON.stringify(PETS);
const PET = JSON.stringify(PETS[0]);

const rateLimitHeaders = () => {
  const now = Date.now();
  const minuteReset = now - (now % 60_000) + 60_000;
  const dayReset = now - (now % 86_400_000) + 86_400_000;
  const t = (at: number) => Math.ceil((at - now) / 1000);
  return {
    "X-RateLimit-Limit": "1000000000",
    "X-RateLimit-Remaining": "999999999",
    "X-RateLimit-Reset": String(Math.ceil(minuteReset / 1000)),
    RateLimit: `"minute";r=999999999;t=${t(minuteReset)}, "day";r=999999999;t=${t(dayReset)}`,
    "RateLimit-Policy": `"minute";q=1000000000;w=60, "day";q=1000000000;w=86400`,
  };
};

function json(body: string, status: number, extra: Record<string, string> = {}): Response {
  return new Response(body, {
    status,
    headers: {
      "Content-Type": "application/json",
      "X-Request-Id": crypto.randomUUID(),
      "Server-Timing": "total;dur=0",
      ...rateLimitHeaders(),
      ...extra,
    },
  });
}

const NOT_FOUND = JSON.stringify({ code: "not_found", message: "No such resource.", status: 404 });

export default {
  async fetch(request: Request): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === "/v1/pets") {
      if (request.method === "GET") return json(PAGE, 200);
      if (request.method === "POST") {
        await request.arrayBuffer(); // read the body, as the API does
        return json(PET, 201, { Location: "/v1/pets/1" });
      }
    }
    if (request.method === "GET" && /^\/v1\/pets\/[0-9]+$/.test(pathname)) {
      return json(PET, 200, {
        Deprecation: "@1795305600",
        Sunset: "Thu, 05 Dec 2030 00:00:00 GMT",
        Link: '</v1/pets>; rel="successor-version"',
      });
    }
    return json(NOT_FOUND, 404);
  },
};
