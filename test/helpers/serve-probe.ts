// What a test asks a running `serve`: admin routes with the admin key, and a fixed greedy probe
// whose log-probs tell which weights serve.

import assert from 'node:assert/strict';

export const ADMIN = 'admin-secret';

export async function admin(
  root: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${root}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: await res.json() };
}

export async function servingVersion(root: string): Promise<number> {
  return (await admin(root, 'GET', '/admin/status')).json.version as number;
}

let probes = 0;
/** A greedy request with log-probs in a session of its own: what the serving weights say about a fixed prompt. */
export async function probe(url: string): Promise<{ tokens: string[]; logprobs: number[] }> {
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': `probe-${++probes}` },
    body: JSON.stringify({
      model: 'main-model',
      messages: [{ role: 'user', content: 'Name three colours of the rainbow.' }],
      max_tokens: 6,
      temperature: 0,
      logprobs: true,
      top_logprobs: 5,
    }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as {
    choices: { logprobs: { content: { token: string; logprob: number; top_logprobs: { logprob: number }[] }[] } }[];
  };
  const content = body.choices[0]!.logprobs.content;
  return {
    tokens: content.map((c) => c.token),
    logprobs: content.flatMap((c) => [c.logprob, ...c.top_logprobs.map((t) => t.logprob)]),
  };
}
