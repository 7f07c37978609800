// The part of node:async_hooks that workerd provides under the nodejs_als flag (wrangler.toml),
// typed here because the project does not depend on @types/node.
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    run<R>(store: T, callback: () => R): R;
    getStore(): T | undefined;
  }
}
