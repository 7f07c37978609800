// @ts-check
// What sampled responses say about their own work: Server-Timing (the API's phases) and
// X-Bench-Calls (the bench entry Worker's count of simulated round trips).

/** The `q` quantile of ascending `sorted` (nearest rank); NaN when empty. */
export function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * Median and p99 of each Server-Timing metric (auth, quota, db, total …) over the sampled
 * responses.
 * @param {(string | null | undefined)[]} samples
 */
export function serverTiming(samples) {
  const byMetric = {};
  for (const header of samples) {
    if (!header) continue;
    for (const part of header.split(",")) {
      const [name, ...params] = part.trim().split(";");
      const dur = params.map((p) => p.trim().match(/^dur=([0-9.]+)$/)).find(Boolean);
      if (name && dur) (byMetric[name] ??= []).push(Number(dur[1]));
    }
  }
  return Object.fromEntries(
    Object.entries(byMetric).map(([name, values]) => {
      const sorted = Float64Array.from(values).sort();
      return [
        name,
        { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: values.length },
      ];
    }),
  );
}

/**
 * Limiter calls and D1 queries per 1,000 responses, from each sampled response's X-Bench-Calls
 * (`limiter=N, d1=M, d1-pets=P`, sent only while the simulated network is on): all D1 round
 * trips, and those that read or wrote pets (the others are key records, e.g. a key's re-read
 * every 25 s); null when none carried it.
 * @param {(string | null | undefined)[]} headers
 */
export function callsPerThousand(headers) {
  let limiter = 0;
  let d1 = 0;
  let d1Pets = 0;
  let n = 0;
  for (const h of headers) {
    const m = h?.match(/^limiter=(\d+), d1=(\d+), d1-pets=(\d+)/);
    if (!m) continue;
    limiter += Number(m[1]);
    d1 += Number(m[2]);
    d1Pets += Number(m[3]);
    n++;
  }
  const perThousand = (x) => (1000 * x) / n;
  return n
    ? { limiter: perThousand(limiter), d1: perThousand(d1), d1Pets: perThousand(d1Pets), n }
    : null;
}
