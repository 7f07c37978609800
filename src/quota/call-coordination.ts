/**
 * Call coordination: the calls one lease holder has in flight to the key's object for one key,
 * and who waits for whom. A call that asks for a lease or hands one back runs alone (every other
 * call waits for it); a renewal runs while requests go on admitting from the lease; requests
 * decided one by one each make their own call. What this makes exact is in docs/quotas.md
 * ("The machine", an isolate's invariants).
 */
export class CallsInFlight {
  /** The call that asks for a lease or hands one back; others wait for it. */
  #exclusive: Promise<unknown> | null = null;
  /** The renewal in flight: requests keep admitting from the lease, and wait only if it runs out. */
  #renewal: Promise<unknown> | null = null;
  /** The calls for requests decided one by one now in flight (each made by its own request). */
  readonly #plainCalls = new Set<Promise<unknown>>();

  /** The call asking for a lease or handing one back, while it is in flight. */
  get exclusive(): Promise<unknown> | null {
    return this.#exclusive;
  }

  /** The renewal (or refill) in flight, if any. */
  get renewal(): Promise<unknown> | null {
    return this.#renewal;
  }

  /** How many requests decided one by one are in flight. */
  get plainInFlight(): number {
    return this.#plainCalls.size;
  }

  /** No call of any kind in flight. */
  get idle(): boolean {
    return !this.#exclusive && !this.#renewal && this.#plainCalls.size === 0;
  }

  /** The oldest call for a request decided one by one still in flight, if any. */
  firstPlain(): Promise<unknown> | undefined {
    const [first] = this.#plainCalls;
    return first;
  }

  /** Waits until no lease call (a grant, a renewal or a hand-back) is in flight. */
  async leaseCallsSettled(): Promise<void> {
    for (;;) {
      const pending = this.#exclusive ?? this.#renewal;
      if (!pending) return;
      await pending.catch(() => undefined);
    }
  }

  /** Runs `call` as the call others wait for, until it settles. */
  exclusively<T>(call: Promise<T>): Promise<T> {
    const running = call.finally(() => {
      this.#exclusive = null;
    });
    this.#exclusive = running;
    return running;
  }

  /** Runs `call` as the renewal in flight, until it settles. */
  asRenewal<T>(call: Promise<T>): Promise<T> {
    const running = call.finally(() => {
      this.#renewal = null;
    });
    this.#renewal = running;
    return running;
  }

  /** Starts the call of a request decided one by one, counted in flight until it settles. */
  plain<T>(start: () => Promise<T>): Promise<T> {
    const running = start().finally(() => {
      this.#plainCalls.delete(running);
    });
    this.#plainCalls.add(running);
    return running;
  }
}

/** `promise`, or a rejection once `ms` of real time have passed. */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => {
    if (timer !== null) clearTimeout(timer);
  });
}
