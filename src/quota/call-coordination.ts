/**
 * A lease holder's calls in flight: one that asks for a lease or hands one back runs alone; a
 * renewal runs while requests admit from the lease; other requests each make their own.
 */
export class CallsInFlight {
  #exclusive: Promise<unknown> | null = null;
  /** Requests keep admitting from the lease, and wait only if it runs out. */
  #renewal: Promise<unknown> | null = null;
  readonly #plainCalls = new Set<Promise<unknown>>();

  get exclusive(): Promise<unknown> | null {
    return this.#exclusive;
  }

  get renewal(): Promise<unknown> | null {
    return this.#renewal;
  }

  get plainInFlight(): number {
    return this.#plainCalls.size;
  }

  get idle(): boolean {
    return !this.#exclusive && !this.#renewal && this.#plainCalls.size === 0;
  }

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
