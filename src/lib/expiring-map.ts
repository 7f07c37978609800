/**
 * An isolate-local map whose entries expire, with a size cap (the oldest entry goes first), so
 * that per-isolate caches stay bounded whatever the traffic.
 */
export class ExpiringMap<K, V> {
  readonly #entries = new Map<K, { value: V; until: number }>();

  constructor(private readonly maxEntries: number) {}

  get(key: K, now: number): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.until > now) return entry.value;
    this.#entries.delete(key);
    return undefined;
  }

  set(key: K, value: V, until: number): void {
    this.#entries.delete(key);
    if (this.#entries.size >= this.maxEntries)
      this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value, until });
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }

  deleteWhere(matches: (value: V) => boolean): void {
    for (const [key, entry] of this.#entries) if (matches(entry.value)) this.#entries.delete(key);
  }
}
