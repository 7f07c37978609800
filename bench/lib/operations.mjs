// @ts-check
// The operations a bench run measures, as autocannon request lists, built from a seeded API.
import { randomUUID } from "node:crypto";

/**
 * The paths of a list walked page by page from `first`, following each Link rel="next".
 * @param {string} url the API's origin
 * @param {string} first
 * @param {Record<string, string>} headers
 */
async function walk(url, first, headers) {
  const paths = [];
  /** @type {string | undefined} */
  let next = first;
  while (next) {
    paths.push(next);
    const res = await fetch(url + next, { headers });
    if (res.status !== 200) throw new Error(`walking ${next}: ${res.status}`);
    const link = res.headers.get("Link")?.match(/^<([^>]+)>; rel="next"$/)?.[1];
    // Absolute with PUBLIC_ORIGIN set, else a relative reference: resolve it either way.
    const resolved = link && new URL(link, url);
    next = resolved && resolved.pathname + resolved.search;
  }
  return paths;
}

/**
 * The measured operations. `floor: true` marks the one the floor Worker also answers.
 * @param {string} url the API's origin
 * @param {Record<string, string>} headers the benchmark key's
 * @param {number[]} ids pets to get (seeded)
 */
export async function operations(url, headers, ids) {
  // Pages 2–9 of the unfiltered list (each full: 20 pets and a next) and the last page of the
  // sold pets (a tail: 66 of the 200 seeded are sold, and the bench only creates pending pets).
  const fullPages = (await walk(url, "/v1/pets?limit=20", headers)).slice(1, 9);
  const tailPage = (await walk(url, "/v1/pets?limit=20&status=sold", headers)).at(-1);
  return [
    {
      label: "`GET /v1/pets?limit=20` (first page)",
      short: "list",
      requests: [{ method: "GET", path: "/v1/pets?limit=20" }],
      floor: true,
    },
    {
      label: "`GET /v1/pets?limit=20&cursor=…` (pages 2–9, full)",
      short: "pages",
      requests: fullPages.map((path) => ({ method: "GET", path })),
    },
    {
      label: "`GET /v1/pets?limit=20&status=sold&cursor=…` (tail page)",
      short: "tail",
      requests: [{ method: "GET", path: tailPage }],
    },
    {
      label: "`GET /v1/pets?status=available`",
      short: "filter",
      requests: [{ method: "GET", path: "/v1/pets?status=available" }],
    },
    {
      label: "`POST /v1/pets` (new `Idempotency-Key` each)",
      short: "create",
      requests: [
        {
          method: "POST",
          path: "/v1/pets",
          headers: { ...headers, "Content-Type": "application/json" },
          body: JSON.stringify({ name: "Bench", categoryId: 3, status: "pending" }),
          // A fresh key per request: every create is a first create (one D1 batch), not a replay.
          setupRequest: (req) => ({
            ...req,
            headers: { ...req.headers, "Idempotency-Key": randomUUID() },
          }),
        },
      ],
    },
    {
      label: "`GET /v1/pets/{id}`",
      short: "get",
      requests: ids.map((id) => ({ method: "GET", path: `/v1/pets/${id}` })),
    },
  ];
}
