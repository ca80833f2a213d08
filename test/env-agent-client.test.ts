// AgentClient's seeded requests (common random numbers for evaluation passes), against an HTTP
// test double that records what it was sent.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage } from '../src/chat/messages.js';
import { AgentClient, type EpisodeIdentity } from '../src/env/agent-client.js';

test('a seeded client seeds each request by task, rollout and step; an unseeded one sends no seed', async (t) => {
  const bodies: Record<string, unknown>[] = [];
  const recordingDouble = createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', () => {
      bodies.push(JSON.parse(text) as Record<string, unknown>);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'Answer: 4' } }] }));
    });
  });
  await new Promise<void>((r) => recordingDouble.listen(0, '127.0.0.1', r));
  t.after(() => recordingDouble.close());
  const url = `http://127.0.0.1:${(recordingDouble.address() as AddressInfo).port}/v1`;
  const who = (taskId: string, rolloutIndex: number, sessionId: string): EpisodeIdentity => ({
    sessionId,
    taskId,
    rolloutIndex,
    rolloutCount: 2,
  });
  const one: ChatMessage[] = [{ role: 'user', content: 'What is 2 + 2?' }];
  const two: ChatMessage[] = [
    ...one,
    { role: 'assistant', content: 'Let me compute.' },
    { role: 'user', content: 'Go on.' },
  ];

  const seeded = new AgentClient({ url, maxTokens: 8, seed: 1 });
  await seeded.chat(one, [], who('t1', 0, 'a'));
  await seeded.chat(one, [], who('t1', 0, 'another session, same task and rollout'));
  await seeded.chat(one, [], who('t1', 1, 'a'));
  await seeded.chat(one, [], who('t2', 0, 'a'));
  await seeded.chat(two, [], who('t1', 0, 'a'));
  await new AgentClient({ url, maxTokens: 8, seed: 2 }).chat(one, [], who('t1', 0, 'a'));
  await new AgentClient({ url, maxTokens: 8 }).chat(one, [], who('t1', 0, 'a'));

  const seeds = bodies.map((b) => b.seed);
  assert.equal(seeds[0], seeds[1], 'the same task, rollout and step draw the same numbers in any session');
  assert.ok(seeds.slice(0, 6).every((s) => Number.isSafeInteger(s) && (s as number) >= 0));
  assert.equal(new Set([seeds[0], seeds[2], seeds[3], seeds[4], seeds[5]]).size, 5, 'rollout, task, step, seed');
  assert.equal('seed' in bodies[6]!, false);
});
