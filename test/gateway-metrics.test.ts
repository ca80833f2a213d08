// GET /metrics on the gateway alone: the strict exposition parser the serve test relies on (it must
// reject what the format forbids), the route disabled without a key, and one registry per server:
// two gateways in one process count only their own requests, under route patterns, never paths.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServeMetrics } from '../src/metrics/serve-metrics.js';
import { scriptedBackend, startGateway } from './helpers/gateway.js';
import { histogramProblems, parseExposition, sampleValue } from './helpers/prometheus-text.js';

const KEY = 'metrics-key-1';

test('the exposition parser accepts the format and rejects what it forbids', () => {
  const good = [
    '# HELP a_total Counts \\\\ things\\nover two lines',
    '# TYPE a_total counter',
    'a_total{path="x\\"y\\\\z\\nw",k="v",} 3 1700000000000',
    '# a plain comment',
    '# TYPE g gauge',
    'g NaN',
    'g{x="1"} -Inf',
    'g{x="2"} 1.5e-3',
    '# TYPE h histogram',
    'h_bucket{le="1"} 1',
    'h_bucket{le="+Inf"} 2',
    'h_sum 3.5',
    'h_count 2',
    '',
  ].join('\n');
  const f = parseExposition(good);
  assert.equal(f.get('a_total')!.help, 'Counts \\ things\nover two lines');
  assert.deepEqual(f.get('a_total')!.samples[0]!.labels, { path: 'x"y\\z\nw', k: 'v' });
  assert.equal(f.get('a_total')!.samples[0]!.timestampMs, 1700000000000);
  assert.ok(Number.isNaN(sampleValue(f, 'g')!));
  assert.equal(sampleValue(f, 'g', { x: '1' }), Number.NEGATIVE_INFINITY);
  assert.equal(sampleValue(f, 'g', { x: '2' }), 0.0015);
  assert.deepEqual(histogramProblems(f), []);

  const bad: [string, RegExp][] = [
    ['x 1\n', /no TYPE before it/],
    ['# TYPE x counter\nx{a="1} 1\n', /unterminated value/],
    ['# TYPE x counter\nx{a="\\t"} 1\n', /bad escape/],
    ['# TYPE x counter\nx{a="1",a="2"} 1\n', /repeated/],
    ['# TYPE x counter\nx{1a="1"} 1\n', /bad label name/],
    ['# TYPE x counter\nx 1\nx 2\n', /sample repeated/],
    ['# TYPE x counter\nx one\n', /bad value/],
    ['# TYPE g gauge\ng Nan\n', /bad value/],
    ['# TYPE x counter\nx 1 2 3\n', /expected a value/],
    ['# TYPE x counter\nx 1 1.5\n', /bad timestamp/],
    ['# TYPE x counter\nx1\n', /expected a value/],
    ['# TYPE x counter\n# TYPE x gauge\n', /second TYPE/],
    ['# TYPE x countr\n', /unknown type/],
    ['# TYPE x counter\nx 1', /no final newline/],
    ['# TYPE g gauge\ng_sum 1\n', /no TYPE before it/],
    ['# TYPE x counter\n{a="1"} 1\n', /not a sample/],
  ];
  for (const [text, why] of bad) assert.throws(() => parseExposition(text), why, JSON.stringify(text));

  const broken = parseExposition(
    ['# TYPE h histogram', 'h_bucket{le="1"} 2', 'h_bucket{le="2"} 1', 'h_bucket{le="+Inf"} 3', 'h_count 4', ''].join(
      '\n',
    ),
  );
  assert.deepEqual(histogramProblems(broken), [
    'h[]: bucket le=2 decreases',
    'h[]: +Inf bucket 3 != count 4',
    'h[]: no _sum',
  ]);
});

test('/metrics is disabled without a key that may read it, and without a metrics object', async (t) => {
  const { backend } = await scriptedBackend();
  const noKey = await startGateway(backend, {}, { metrics: new ServeMetrics({ processMetrics: false }) });
  const noMetrics = await startGateway(backend, { metricsKeys: [KEY] });
  t.after(async () => {
    await noKey.close();
    await noMetrics.close();
  });
  for (const [gw, why] of [
    [noKey, /set metricsKeys/],
    [noMetrics, /started without them/],
  ] as const) {
    const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'metrics_disabled');
    assert.match(body.error.message, why);
  }
});

test('each gateway has its own registry; routes are labelled by pattern, unknown paths as unmatched', async (t) => {
  const { backend } = await scriptedBackend();
  const [a, b] = await Promise.all(
    [0, 1].map(() =>
      startGateway(backend, { metricsKeys: [KEY] }, { metrics: new ServeMetrics({ processMetrics: false }) }),
    ),
  );
  t.after(async () => {
    await a!.close();
    await b!.close();
  });
  for (const path of ['/v1/models', '/v1/models/Qwen/secret-model-name', '/private/path-text', '/healthz'])
    await (await fetch(`${a!.url}${path}`)).arrayBuffer();
  const scrape = async (url: string) => {
    const unauthorized = await fetch(`${url}/metrics`);
    assert.equal(unauthorized.status, 401);
    const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 200);
    const text = await res.text();
    const families = parseExposition(text);
    assert.deepEqual(histogramProblems(families), []);
    return { text, families };
  };
  const fromA = await scrape(a!.url);
  const requests = 'openclaw_rl_http_requests_total';
  assert.equal(sampleValue(fromA.families, requests, { method: 'GET', route: '/v1/models', status: '200' }), 1);
  assert.equal(sampleValue(fromA.families, requests, { method: 'GET', route: '/v1/models/:id*', status: '404' }), 1);
  assert.equal(sampleValue(fromA.families, requests, { method: 'other', route: 'unmatched', status: '404' }), 1);
  assert.equal(sampleValue(fromA.families, requests, { method: 'GET', route: '/metrics', status: '401' }), 1);
  const duration = 'openclaw_rl_http_request_duration_seconds';
  assert.equal(
    sampleValue(fromA.families, duration, { method: 'GET', route: '/healthz', kind: 'none' }, `${duration}_count`),
    1,
  );
  for (const secret of ['secret-model-name', 'path-text', KEY]) assert.ok(!fromA.text.includes(secret), secret);
  assert.ok(!fromA.families.has('process_cpu_user_seconds_total'), 'process metrics off, as asked');
  assert.ok(!fromA.families.has('openclaw_rl_train_steps_total'), 'no learning source: no learning families');

  const fromB = await scrape(b!.url);
  assert.equal(sampleValue(fromB.families, requests, { method: 'GET', route: '/v1/models', status: '200' }), undefined);
  assert.equal(sampleValue(fromB.families, requests, { method: 'GET', route: '/metrics', status: '401' }), 1);
});
