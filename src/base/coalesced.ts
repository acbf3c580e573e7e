/**
 * One run of an asynchronous job at a time, shared by the callers that asked for it.
 *
 * @module
 */

/**
 * Wraps `job` so that it runs once at a time: a call while none runs starts one; calls while one
 * runs share the next, started as soon as the running one ends (the running one may have begun
 * before what they must see). So a burst of any size costs at most two runs. `job` should not
 * reject; if it does, the callers of that run see the rejection and the next run still starts.
 */
export function coalesced<T>(job: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  let waiting: PromiseWithResolvers<T> | undefined;
  const run = (): Promise<T> => {
    const done = job();
    const next = () => {
      const w = waiting;
      waiting = undefined;
      if (w === undefined) {
        running = undefined;
        return;
      }
      (running = run()).then(w.resolve, w.reject);
    };
    done.then(next, next);
    return done;
  };
  return () => {
    if (running === undefined) return running = run();
    waiting ??= Promise.withResolvers<T>();
    return waiting.promise;
  };
}
