// A generation that starts when it is asked for, not when it is first read. An async generator's
// body runs only on its first next(), so a sampler written as one would wait for its caller to
// read before it prefilled or sent its request; serve asks first and records the turn meanwhile
// (src/gateway/chat.ts), so that wait would add serve's work to every request.

/**
 * `events`, already running to its first event. A caller that aborts `signal` before reading it
 * still gets the stream whole when it reads later: from then on the generator is read to its end
 * in the background (an aborted generation ends within a step, with its cancelled finish), so
 * that what it holds (a sequence, a version, a connection) is released even if nobody reads it.
 */
export function startNow<T>(events: AsyncGenerator<T, void>, signal?: AbortSignal): AsyncIterable<T> {
  // Results asked of the generator and not yet handed out, in the order they were asked.
  const ahead: Promise<IteratorResult<T, void>>[] = [events.next()];
  // Read or not, a failure is handed to whoever reads: it must not surface as an unhandled rejection.
  ahead[0]!.catch(() => {});
  let reading = false;
  const readAway = async () => {
    signal?.removeEventListener('abort', readAway);
    try {
      while (!reading) {
        const step = events.next();
        step.catch(() => {});
        ahead.push(step);
        if ((await step).done) return;
      }
    } catch {}
  };
  if (signal?.aborted) void readAway();
  else signal?.addEventListener('abort', readAway, { once: true });
  const iterator: AsyncIterator<T, void> = {
    next() {
      if (!reading) {
        reading = true;
        signal?.removeEventListener('abort', readAway);
      }
      return ahead.shift() ?? events.next();
    },
    return(value?: void | PromiseLike<void>) {
      reading = true;
      signal?.removeEventListener('abort', readAway);
      return events.return(value);
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
