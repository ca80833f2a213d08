// A conversation as one supervised training sample: the prompt is everything up to the first
// reply, the completion everything after it, and only the assistant's tokens (content and the
// closing <|im_end|>) are trained. The ids are exactly what serving produces: the same chat
// template and tokenizer, and special tokens cut the text into pieces that encode alone.

import type { ChatCodec } from '../chat/codec.js';
import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import { renderPrompt } from '../chat/prompt.js';
import type { TrainingSample } from '../engine/types.js';

export function conversationSample(
  messages: readonly ChatMessage[],
  codec: ChatCodec,
  tools?: readonly ToolSpec[],
): TrainingSample {
  const { tokenizer, template } = codec;
  const ids = renderPrompt(template, tokenizer, messages, tools ? { tools } : {}).ids;
  const start = tokenizer.tokenToId('<|im_start|>'),
    end = tokenizer.tokenToId('<|im_end|>');
  const header = tokenizer.encode('assistant\n');
  if (start === undefined || end === undefined) throw new Error('the tokenizer has no <|im_start|> / <|im_end|>');
  const mask = new Array<number>(ids.length).fill(0);
  let firstReply = -1;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] !== start || !header.every((h, k) => ids[i + 1 + k] === h)) continue;
    const from = i + 1 + header.length;
    if (firstReply < 0) firstReply = from;
    let j = from;
    while (j < ids.length && ids[j] !== end) mask[j++] = 1;
    if (j < ids.length) mask[j] = 1;
    i = j;
  }
  if (firstReply < 0) throw new Error('the conversation has no assistant reply');
  // The newline after the last <|im_end|> belongs to the next prompt, not to any reply.
  const last = mask.lastIndexOf(1);
  return {
    promptIds: ids.slice(0, firstReply),
    completionIds: ids.slice(firstReply, last + 1),
    advantages: new Array<number>(last + 1 - firstReply).fill(1),
    mask: mask.slice(firstReply, last + 1),
  };
}
