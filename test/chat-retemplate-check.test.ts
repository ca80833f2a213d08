// checkRetemplate's comparison: the re-rendered ids must start with prompt ids ++ completion ids;
// where they first differ is reported. The renderer and encoder are test doubles returning fixed ids.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkRetemplate } from '../src/chat/retemplate-check.js';
import type { PromptCodec } from '../src/chat/prompt-codec.js';

function codecDouble(rendered: number[] | Error): PromptCodec {
  return {
    renderer: {
      render: () => {
        if (rendered instanceof Error) throw rendered;
        return 'text';
      },
    },
    encoder: { encode: () => rendered as number[] },
  } as unknown as PromptCodec;
}

const input = (promptIds: number[], completionIds: number[]) => ({
  messages: [{ role: 'user' as const, content: 'hi' }],
  tools: undefined,
  enableThinking: undefined,
  response: { role: 'assistant' as const, content: 'ok' },
  promptIds,
  completionIds,
});

test('re-rendered ids that start with prompt ++ completion match, also when the rendering goes on', () => {
  assert.deepEqual(checkRetemplate(codecDouble([1, 2, 3, 4, 5]), input([1, 2, 3], [4, 5])), {
    match: true,
    renderedTokens: 5,
    recordedTokens: 5,
  });
  assert.deepEqual(checkRetemplate(codecDouble([1, 2, 3, 4, 5, 9]), input([1, 2, 3], [4, 5])), {
    match: true,
    renderedTokens: 6,
    recordedTokens: 5,
  });
});

test('the first differing position is reported, in the prompt or in the completion', () => {
  assert.deepEqual(checkRetemplate(codecDouble([1, 7, 3, 4, 5]), input([1, 2, 3], [4, 5])), {
    match: false,
    firstMismatch: 1,
    renderedTokens: 5,
    recordedTokens: 5,
  });
  assert.deepEqual(checkRetemplate(codecDouble([1, 2, 3, 4, 6]), input([1, 2, 3], [4, 5])), {
    match: false,
    firstMismatch: 4,
    renderedTokens: 5,
    recordedTokens: 5,
  });
  assert.deepEqual(checkRetemplate(codecDouble([1, 2, 3, 8, 5]), input([1, 2, 3], [4, 5])), {
    match: false,
    firstMismatch: 3,
    renderedTokens: 5,
    recordedTokens: 5,
  });
});

test('a shorter rendering fails where it ends; a rendering error fails at 0', () => {
  assert.deepEqual(checkRetemplate(codecDouble([1, 2]), input([1, 2, 3], [4, 5])), {
    match: false,
    firstMismatch: 2,
    renderedTokens: 2,
    recordedTokens: 5,
  });
  assert.deepEqual(checkRetemplate(codecDouble([1, 2, 3, 4]), input([1, 2, 3], [4, 5])), {
    match: false,
    firstMismatch: 4,
    renderedTokens: 4,
    recordedTokens: 5,
  });
  assert.deepEqual(checkRetemplate(codecDouble(new Error('template')), input([1, 2, 3], [4, 5])), {
    match: false,
    firstMismatch: 0,
    renderedTokens: 0,
    recordedTokens: 5,
  });
});
