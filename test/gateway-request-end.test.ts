// Issue 15 item 3: every way a chat request ends stops its generation, and any session identity
// (non-Latin-1 text, emoji) travels in the x-session-id header percent-encoded, never failing a
// request whose turn is already committed; a lone surrogate is refused before anything runs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { post, scriptedBackend, sseEvents, startGateway, type TestGateway } from './helpers/gateway.js';
import { replyIds, type ScriptedSampler } from './helpers/scripted-sampler.js';

const { backend, sampler } = await scriptedBackend();
const tok = backend.tokenizer;
const ask = (extra: Record<string, unknown> = {}) => ({ messages: [{ role: 'user', content: 'hello' }], ...extra });
const MAIN = { 'x-turn-type': 'main' };

async function withGateway(fn: (gw: TestGateway, s: ScriptedSampler) => Promise<void>) {
  const gw = await startGateway(backend);
  try {
    await fn(gw, sampler);
  } finally {
    await gw.close();
    sampler.calls.length = 0;
  }
}

/** Resolves when the signal is aborted; rejects after ms (the generation was never cancelled). */
function aborted(signal: AbortSignal | undefined, ms = 5000): Promise<void> {
  if (!signal) return Promise.reject(new Error('generate() got no abort signal'));
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the generation was not cancelled within ${ms} ms`)), ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

for (const [name, identity] of [
  ['CJK user', { user: '名前' }],
  ['emoji session_id', { session_id: 'chat-😀' }],
  ['prompt_cache_key with %', { prompt_cache_key: 'a%b c:2' }],
] as const) {
  test(`a ${name} is carried percent-encoded in x-session-id, streamed or not, and the turn is acknowledged`, () =>
    withGateway(async (gw) => {
      const id =
        'user' in identity ? `user:${identity.user}` : 'session_id' in identity ? identity.session_id : 'a%b c';
      sampler.push(replyIds(tok, { content: 'one' })).push(replyIds(tok, { content: 'two' }));
      const plain = await post(`${gw.url}/v1/chat/completions`, ask(identity), MAIN);
      assert.equal(plain.status, 200, plain.text);
      assert.equal(decodeURIComponent(plain.headers.get('x-session-id')!), id);
      assert.match(plain.headers.get('x-session-id')!, /^[\x21-\x7e]+$/);
      const streamed = await post(
        `${gw.url}/v1/chat/completions`,
        ask({ ...identity, stream: true, messages: [{ role: 'user', content: 'again' }] }),
        MAIN,
      );
      assert.equal(streamed.status, 200);
      assert.equal(decodeURIComponent(streamed.headers.get('x-session-id')!), id);
      assert.equal(sseEvents(streamed.text).at(-1), '[DONE]');
      assert.deepEqual(
        [...gw.store.exportLines()].map((l) => l.session_id),
        [id, id],
        'stored under the identity itself, not its encoding',
      );
    }));
}

test('a lone surrogate in an identity is a 400 before anything runs', () =>
  withGateway(async (gw) => {
    for (const identity of [{ user: 'a\ud800b' }, { session_id: '\udc00' }, { prompt_cache_key: 'k\ud83d' }]) {
      const res = await post(`${gw.url}/v1/chat/completions`, ask(identity), MAIN);
      assert.equal(res.status, 400, res.text);
      assert.match(
        res.json.error.message,
        /must be 1-256 printable characters .*no control characters or lone surrogates/,
      );
    }
    assert.equal(sampler.calls.length, 0);
    assert.equal(gw.store.counts().turns, 0);
  }));

test('path: a client that leaves a non-streamed request mid-generation cancels it', () =>
  withGateway(async (gw) => {
    sampler.push({ ids: tok.encode('partial'), hang: true });
    const controller = new AbortController();
    const pending = fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: MAIN,
      body: JSON.stringify(ask()),
      signal: controller.signal,
    });
    while (sampler.calls.length === 0) await new Promise((r) => setImmediate(r));
    controller.abort();
    await pending.catch(() => {});
    await aborted(sampler.calls[0]!.signal);
  }));

test('path: a client that leaves a stream cancels it', () =>
  withGateway(async (gw) => {
    sampler.push({ ids: tok.encode('partial'), hang: true });
    const controller = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: MAIN,
      body: JSON.stringify(ask({ stream: true })),
      signal: controller.signal,
    });
    await res.body!.getReader().read();
    controller.abort();
    await aborted(sampler.calls[0]!.signal);
  }));

test('path: an error after the generation started (before its first event is read) cancels it', () =>
  withGateway(async (gw) => {
    // TEST DOUBLE: the recorder's input encoding fails, between generate() and the first event.
    const recorder = gw.gateway.recorder;
    const original = recorder.prepareInputs;
    recorder.prepareInputs = () => {
      throw new Error('test double: prepareInputs failed');
    };
    try {
      for (const stream of [false, true]) {
        sampler.push({ ids: tok.encode('never read'), hang: true });
        const res = await post(`${gw.url}/v1/chat/completions`, ask({ stream }), MAIN);
        assert.equal(res.status, 500);
        await aborted(sampler.calls.at(-1)!.signal);
      }
    } finally {
      recorder.prepareInputs = original;
    }
    assert.equal(gw.store.counts().turns, 0);
  }));

test('path: a request answered normally leaves no generation behind', () =>
  withGateway(async (gw) => {
    const open = sampler.open;
    sampler.push(replyIds(tok, { content: 'done' }));
    assert.equal((await post(`${gw.url}/v1/chat/completions`, ask(), MAIN)).status, 200);
    // Its events ran to their finish before the answer: nothing was left to stop.
    assert.equal(sampler.open, open, 'the generation ended');
    assert.equal(sampler.calls[0]!.signal?.aborted, false, 'a finished generation is not aborted');
  }));
