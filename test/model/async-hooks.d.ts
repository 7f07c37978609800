// The part of node:async_hooks the quota model uses (workerd provides it under the nodejs_als
// flag; the Workers types do not declare it).
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    getStore(): T | undefined;
    run<R>(store: T, callback: () => R): R;
  }
}
