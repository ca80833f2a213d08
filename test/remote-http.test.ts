// The remote backends' HTTP client (src/engine/remote/http.ts) against plain node:http servers:
// kept-alive connections are reused, a kept-alive connection the server closed is retried once on
// a new one, and the errors the router fails over on (refused, no answer, 503) are told apart
// from the ones it must not (an error status, a stream that breaks off).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { RemoteServerError, ServerClient, ServerUnavailableError } from '../src/engine/remote/http.js';

async function listen(handler: (req: IncomingMessage, res: ServerResponse, socket: Socket) => void) {
  const connections: Socket[] = [];
  const server: Server = createServer((req, res) => handler(req, res, req.socket));
  server.on('connection', (s) => connections.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connections,
    close: () => {
      for (const s of connections) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const readBody = async (req: IncomingMessage) => {
  let text = '';
  for await (const c of req) text += c;
  return text;
};

function streamEvents(res: ServerResponse, events: unknown[], done = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  if (done) res.write('data: [DONE]\n\n');
  res.end();
}

test('streams and JSON answers reuse one kept-alive connection', async () => {
  const server = await listen(async (req, res) => {
    const body = JSON.parse(await readBody(req)) as { n: number };
    if (req.url === '/stream') streamEvents(res, [{ i: 0 }, { i: body.n }]);
    else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echo: body.n, auth: req.headers.authorization ?? null }));
    }
  });
  try {
    const client = new ServerClient(`${server.url}/`, { apiKey: 'k1' });
    for (let n = 1; n <= 3; n++) {
      const events = [];
      for await (const e of client.postStream('/stream', { n }, new AbortController().signal)) events.push(e);
      assert.deepEqual(events, [{ i: 0 }, { i: n }]);
      assert.deepEqual(await client.postJson('/json', { n }), { echo: n, auth: 'Bearer k1' });
    }
    assert.equal(server.connections.length, 1, 'six requests over one connection');
  } finally {
    await server.close();
  }
});

test('a kept-alive connection the server closed is retried once on a new one', async () => {
  const served = new WeakMap<Socket, number>();
  let answered = 0;
  const server = await listen(async (req, res, socket) => {
    const n = (served.get(socket) ?? 0) + 1;
    served.set(socket, n);
    // The server closes an idle connection just as the next request arrives on it.
    if (n > 1) return socket.destroy();
    await readBody(req);
    answered++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  try {
    const client = new ServerClient(server.url);
    for (let i = 0; i < 3; i++) assert.deepEqual(await client.postJson('/x', {}), { ok: true });
    assert.equal(answered, 3);
    assert.equal(server.connections.length, 3, 'each retry on a new connection');
  } finally {
    await server.close();
  }
});

test('refused, silent and 503 servers are unavailable; an error status and a broken stream are not', async () => {
  const server = await listen(async (req, res) => {
    await readBody(req);
    if (req.url === '/busy') {
      res.writeHead(503, { 'content-type': 'application/json' });
      return res.end('{"error":{"message":"overloaded"}}');
    }
    if (req.url === '/bad') {
      res.writeHead(400, { 'content-type': 'application/json' });
      return res.end('{"detail":"prompt too long"}');
    }
    if (req.url === '/silent') return; // never answers
    if (req.url === '/garbled') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      return res.end('data: {not json\n\n');
    }
    // Breaks off mid-stream: one event, then the connection drops.
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`data: ${JSON.stringify({ i: 0 })}\n\n`, () => setTimeout(() => res.socket?.destroy(), 20));
  });
  try {
    const client = new ServerClient(server.url, { timeoutMs: 200 });
    await assert.rejects(
      client.postJson('/busy', {}),
      (e) => e instanceof ServerUnavailableError && /503: overloaded/.test(e.message),
    );
    await assert.rejects(
      client.postJson('/bad', {}),
      (e) =>
        e instanceof RemoteServerError &&
        !(e instanceof ServerUnavailableError) &&
        /400: prompt too long/.test(e.message),
    );
    await assert.rejects(
      client.postJson('/silent', {}),
      (e) => e instanceof ServerUnavailableError && /within 200 ms/.test(e.message),
    );
    const read = async (path: string) => {
      const got: unknown[] = [];
      for await (const e of client.postStream(path, {}, new AbortController().signal)) got.push(e);
      return got;
    };
    await assert.rejects(read('/garbled'), (e) => e instanceof RemoteServerError && /not JSON/.test(e.message));
    const got: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of client.postStream('/broken', {}, new AbortController().signal)) got.push(e);
      })(),
      (e) => e instanceof RemoteServerError && !(e instanceof ServerUnavailableError) && /broke off/.test(e.message),
    );
    assert.deepEqual(got, [{ i: 0 }], 'what came before the break was delivered');
  } finally {
    await server.close();
  }
  const gone = new ServerClient(server.url);
  await assert.rejects(
    gone.postJson('/x', {}),
    (e) => e instanceof ServerUnavailableError && /ECONNREFUSED/.test(e.message),
  );
});

test("the caller's signal stops a stream after its headers came, and a request before it is sent", async () => {
  let release: () => void = () => {};
  const server = await listen(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`data: ${JSON.stringify({ i: 0 })}\n\n`);
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    res.on('error', () => {});
    res.end('data: [DONE]\n\n');
  });
  try {
    const client = new ServerClient(server.url);
    const stop = new AbortController();
    const got: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of client.postStream('/s', {}, stop.signal)) {
          got.push(e);
          stop.abort();
        }
      })(),
      (e) => (e as Error).name === 'AbortError',
    );
    assert.deepEqual(got, [{ i: 0 }]);
    release();
    await assert.rejects(client.postJson('/s', {}, stop.signal), (e) => (e as Error).name === 'AbortError');
  } finally {
    await server.close();
  }
});
