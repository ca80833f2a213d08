// teacherLogprobs with a TEST DOUBLE chat renderer and a TEST DOUBLE scorer: the hinted prompt is
// rendered with the settings (tools, thinking switch) that reproduce the turn's recorded prompt,
// and each failure is a value with its reason.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentToText, type ChatMessage, type ToolSpec } from '../src/chat/messages.js';
import type { ScoreOptions, ScoredCompletion, Scorer } from '../src/engine/types.js';
import type { RenderIds } from '../src/chat/prompt-codec.js';
import { hintedMessages, teacherLogprobs, type TeacherModel } from '../src/learn/teacher.js';
import type { Turn } from '../src/types.js';

/**
 * TEST DOUBLE renderer: one id per character of each message (role marker first), then a marker
 * per tool when tools are passed, then 801/802 for enableThinking false/true (nothing when
 * undefined). Different settings therefore give different ids. Records every call.
 */
class RendererDouble {
  readonly calls: {
    messages: ChatMessage[];
    tools: readonly ToolSpec[] | undefined;
    enableThinking: boolean | undefined;
  }[] = [];
  /** Settings for which render throws (as a chat template may for an unsupported combination). */
  throwsFor: ((tools: readonly ToolSpec[] | undefined, enableThinking: boolean | undefined) => boolean) | null = null;
  /** When true, enableThinking has no effect on the ids (a template without the switch). */
  ignoresThinking = false;

  readonly render: RenderIds = (messages, tools, enableThinking) => {
    this.calls.push({ messages: structuredClone([...messages]), tools, enableThinking });
    if (this.throwsFor?.(tools, enableThinking)) throw new Error('template error');
    return this.ids(messages, tools, enableThinking);
  };

  ids(
    messages: readonly ChatMessage[],
    tools: readonly ToolSpec[] | undefined,
    enableThinking: boolean | undefined,
  ): number[] {
    const out: number[] = [];
    for (const m of messages)
      out.push(
        500 + ['system', 'user', 'assistant', 'tool'].indexOf(m.role),
        ...[...contentToText(m.content)].map((c) => c.codePointAt(0)!),
      );
    for (const t of tools ?? []) out.push(900 + t.function.name.length);
    if (!this.ignoresThinking && enableThinking !== undefined) out.push(enableThinking ? 802 : 801);
    return out;
  }
}

/** TEST DOUBLE scorer: returns fixed log-probs (or what `answer` says) and records every call. */
class ScorerDouble implements Scorer {
  readonly calls: { promptIds: number[]; completionIds: number[]; opts: ScoreOptions | undefined }[] = [];
  answer: (completionIds: readonly number[]) => Promise<ScoredCompletion> = async (ids) => ({
    logprobs: ids.map((_, i) => -0.25 * (i + 1)),
  });

  logprobs(
    promptIds: readonly number[],
    completionIds: readonly number[],
    opts?: ScoreOptions,
  ): Promise<ScoredCompletion> {
    this.calls.push({ promptIds: [...promptIds], completionIds: [...completionIds], opts });
    return this.answer(completionIds);
  }
}

const TOOLS: ToolSpec[] = [
  { type: 'function', function: { name: 'read', parameters: { type: 'object' } } },
  { type: 'function', function: { name: 'write_file' } },
];
const MESSAGES: ChatMessage[] = [
  { role: 'system', content: 'sys' },
  { role: 'user', content: 'How far?' },
];
const HINT = 'Answer in kilometres.';

function setup(contextLength = 10_000) {
  const renderer = new RendererDouble();
  const scorer = new ScorerDouble();
  const model: TeacherModel = { render: renderer.render, scorer, contextLength };
  return { renderer, scorer, model };
}

/** A turn whose recorded prompt ids are what the renderer gives with these settings. */
function turnRenderedWith(
  renderer: RendererDouble,
  tools: ToolSpec[] | null,
  renderTools: readonly ToolSpec[] | undefined,
  enableThinking: boolean | undefined,
  messages = MESSAGES,
): Pick<Turn, 'messages' | 'tools' | 'promptIds' | 'completionIds'> {
  return {
    messages,
    tools,
    promptIds: renderer.ids(messages, renderTools, enableThinking),
    completionIds: [41, 42, 43],
  };
}

test('teacher: the settings that reproduce the recorded prompt are the ones used for the hinted prompt', async () => {
  const cases: [string, ToolSpec[] | null, readonly ToolSpec[] | undefined, boolean | undefined][] = [
    ['tools, thinking default', TOOLS, TOOLS, undefined],
    ['tools, thinking off', TOOLS, TOOLS, false],
    ['tools, thinking on', TOOLS, TOOLS, true],
    ['tools sent but rendered without them', TOOLS, undefined, false],
    ['no tools, thinking on', null, undefined, true],
    ['empty tool list, thinking off', [], undefined, false],
  ];
  for (const [name, tools, renderTools, enableThinking] of cases) {
    const { renderer, scorer, model } = setup();
    const turn = turnRenderedWith(renderer, tools, renderTools, enableThinking);
    const r = await teacherLogprobs(model, turn, HINT, 3);
    const hintedIds = renderer.ids(hintedMessages(MESSAGES, HINT), renderTools, enableThinking);
    assert.deepEqual(r, { ok: true, logprobs: [-0.25, -0.5, -0.75], version: 3, promptTokens: hintedIds.length }, name);
    assert.equal(scorer.calls.length, 1, name);
    assert.deepEqual(
      scorer.calls[0],
      { promptIds: hintedIds, completionIds: [41, 42, 43], opts: { version: 3 } },
      name,
    );
    const last = renderer.calls[renderer.calls.length - 1]!;
    assert.deepEqual(
      last,
      { messages: hintedMessages(MESSAGES, HINT), tools: renderTools, enableThinking },
      `${name}: the hinted render`,
    );
    assert.equal(last.tools, renderTools, `${name}: the turn's own tool list`);
    assert.ok(
      renderer.calls
        .slice(0, -1)
        .every((c) => c.messages.length === MESSAGES.length && c.messages[1]!.content === 'How far?'),
      `${name}: the search renders the turn's own messages`,
    );
  }
});

test('teacher: a setting whose render throws is skipped; the first reproducing setting wins', async () => {
  const { renderer, scorer, model } = setup();
  const turn = turnRenderedWith(renderer, TOOLS, TOOLS, true);
  renderer.throwsFor = (tools, thinking) => tools !== undefined && thinking === undefined;
  const r = await teacherLogprobs(model, turn, HINT, 0);
  assert.equal(r.ok, true);
  assert.deepEqual(scorer.calls[0]!.promptIds, renderer.ids(hintedMessages(MESSAGES, HINT), TOOLS, true));

  // A template without the switch reproduces the prompt with every value: the default (undefined) is used.
  const b = setup();
  b.renderer.ignoresThinking = true;
  const r2 = await teacherLogprobs(b.model, turnRenderedWith(b.renderer, null, undefined, false), HINT, 0);
  assert.equal(r2.ok, true);
  assert.equal(b.renderer.calls[b.renderer.calls.length - 1]!.enableThinking, undefined);
});

test('teacher: the hint changes only the last user message of what is scored', async () => {
  const { renderer, scorer, model } = setup();
  const messages: ChatMessage[] = [
    { role: 'user', content: 'first' },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: [{ type: 'text', text: 'second' }] },
  ];
  const turn = turnRenderedWith(renderer, null, undefined, undefined, messages);
  const before = structuredClone(messages);
  assert.equal((await teacherLogprobs(model, turn, HINT, 0)).ok, true);
  assert.deepEqual(messages, before, 'the turn is not changed');
  const hinted = renderer.calls[renderer.calls.length - 1]!.messages;
  assert.deepEqual(hinted.slice(0, 2), messages.slice(0, 2));
  assert.match(
    contentToText(hinted[2]!.content),
    /^second\n\n\[hindsight hint for this request\]\nAnswer in kilometres\.$/,
  );
  assert.deepEqual(scorer.calls[0]!.promptIds, renderer.ids(hinted, undefined, undefined));
});

test('teacher: prompt_not_reproducible when no setting renders the recorded ids; nothing is scored', async () => {
  const { renderer, scorer, model } = setup();
  const turn = { ...turnRenderedWith(renderer, TOOLS, TOOLS, false), promptIds: [1, 2, 3] };
  const r = await teacherLogprobs(model, turn, HINT, 0);
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.reason, 'prompt_not_reproducible');
  assert.equal(scorer.calls.length, 0);
  assert.equal(renderer.calls.length, 6, 'with and without tools x default/off/on thinking');

  // A prompt rendered with tools is not reproduced by a turn that has none.
  const b = setup();
  const withTools = {
    ...turnRenderedWith(b.renderer, null, undefined, undefined),
    promptIds: b.renderer.ids(MESSAGES, TOOLS, undefined),
  };
  const r2 = await teacherLogprobs(b.model, withTools, HINT, 0);
  assert.equal(!r2.ok && r2.reason, 'prompt_not_reproducible');
  assert.equal(b.renderer.calls.length, 3);

  // Every render throwing is not reproducible either, and is not an exception.
  const c = setup();
  c.renderer.throwsFor = () => true;
  const r3 = await teacherLogprobs(c.model, turnRenderedWith(c.renderer, null, undefined, undefined), HINT, 0);
  assert.equal(!r3.ok && r3.reason, 'prompt_not_reproducible');
  assert.equal(c.scorer.calls.length, 0);
});

test('teacher: too_long when the hinted prompt plus the completion exceed the context (the boundary fits)', async () => {
  const probe = setup();
  const hintedLength = probe.renderer.ids(hintedMessages(MESSAGES, HINT), undefined, undefined).length;
  const fits = setup(hintedLength + 3);
  const ok = await teacherLogprobs(fits.model, turnRenderedWith(fits.renderer, null, undefined, undefined), HINT, 0);
  assert.equal(ok.ok, true, 'exactly the context length fits');

  const over = setup(hintedLength + 2);
  const r = await teacherLogprobs(over.model, turnRenderedWith(over.renderer, null, undefined, undefined), HINT, 0);
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.reason, 'too_long');
  assert.equal(
    !r.ok && r.detail,
    `hinted prompt ${hintedLength} + completion 3 tokens exceed the context of ${hintedLength + 2}`,
  );
  assert.equal(over.scorer.calls.length, 0);
});

test('teacher: scoring_failed when the scorer throws or returns the wrong number of log-probs', async () => {
  const { renderer, scorer, model } = setup();
  const turn = turnRenderedWith(renderer, null, undefined, undefined);
  scorer.answer = async () => {
    throw new Error('engine stopped');
  };
  assert.deepEqual(await teacherLogprobs(model, turn, HINT, 0), {
    ok: false,
    reason: 'scoring_failed',
    detail: 'engine stopped',
  });
  scorer.answer = () => Promise.reject('a string'); // eslint-disable-line prefer-promise-reject-errors
  assert.deepEqual(await teacherLogprobs(model, turn, HINT, 0), {
    ok: false,
    reason: 'scoring_failed',
    detail: 'a string',
  });
  scorer.answer = async () => ({ logprobs: [-1, -2] });
  assert.deepEqual(await teacherLogprobs(model, turn, HINT, 0), {
    ok: false,
    reason: 'scoring_failed',
    detail: '2 log-probs for 3 tokens',
  });
  scorer.answer = async () => ({ logprobs: [-1, -2, -3, -4] });
  assert.deepEqual(await teacherLogprobs(model, turn, HINT, 0), {
    ok: false,
    reason: 'scoring_failed',
    detail: '4 log-probs for 3 tokens',
  });
  assert.equal(scorer.calls.length, 4);
});
