// The pre-training corpus of the agents benchmark's base policy: tool-call traces on generated
// arithmetic word problems (src/env/arithmetic-tasks.ts), in exactly the messages the tool-call
// environment and the gateway exchange: the environment's system prompt and calculator tool, the
// question, one calculator call, the tool's result, and "Answer: N". The traces carry the base
// model's mistakes at stated rates, so the base solves some tasks and learning has room:
//   wrong operator   the call applies another operator to the right numbers (the judge can see it)
//   wrong number     one of the question's numbers is mistyped in the call
//   miscopied answer the call is right but the final answer is not its result

import type { ChatMessage } from '../chat/messages.js';
import { arithmeticProblem, type ArithmeticProblem } from '../env/arithmetic-tasks.js';
import { evaluate, formatNumber } from '../env/calculator.js';
import { TOOL_CALL_SYSTEM_PROMPT } from '../env/tool-call.js';
import { pick, rng, type Rng } from './random.js';

export interface ToolCorpusOptions {
  seed: number;
  traces: number;
  /** Chance that a call uses a wrong operator. */
  wrongOperator: number;
  /** Chance that a call mistypes one of the question's numbers. */
  wrongNumber: number;
  /** Chance that the final answer is not the call's result. */
  miscopiedAnswer: number;
}

export const DEFAULT_TOOL_CORPUS: ToolCorpusOptions = {
  seed: 1,
  traces: 6000,
  wrongOperator: 0.35,
  wrongNumber: 0.15,
  miscopiedAnswer: 0.2,
};

/** One trace: the episode's messages as the environment would send them after it ended. */
export function toolTrace(problem: ArithmeticProblem, r: Rng, o: ToolCorpusOptions): ChatMessage[] {
  let expression = problem.expression;
  if (r.next() < o.wrongOperator) {
    const ops = [...expression.matchAll(/ [-+*] /g)];
    const at = pick(r, ops);
    const other = pick(
      r,
      [' + ', ' - ', ' * '].filter((x) => x !== at[0]),
    );
    expression = expression.slice(0, at.index) + other + expression.slice(at.index + 3);
  }
  if (r.next() < o.wrongNumber) {
    const numbers = [...expression.matchAll(/\d+/g)];
    const at = pick(r, numbers);
    const changed = String(Number(at[0]) + 1 + Math.floor(r.next() * 9));
    expression = expression.slice(0, at.index) + changed + expression.slice(at.index + at[0].length);
  }
  const result = formatNumber(evaluate(expression));
  const answer = r.next() < o.miscopiedAnswer ? String(Number(result) + pick(r, [-10, -1, 1, 10, 100])) : result;
  return [
    { role: 'system', content: TOOL_CALL_SYSTEM_PROMPT },
    { role: 'user', content: problem.question },
    {
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: 'call_0', type: 'function', function: { name: 'calculator', arguments: JSON.stringify({ expression }) } },
      ],
    },
    { role: 'tool', tool_call_id: 'call_0', name: 'calculator', content: result },
    { role: 'assistant', content: `Answer: ${answer}` },
  ];
}

/**
 * The corpus: traces on positions of a split of their own (`train`, from position 1,000,000 on),
 * so neither the benchmark's training tasks nor its held-out tasks are ever pre-trained on.
 */
export function buildToolCorpus(o: ToolCorpusOptions = DEFAULT_TOOL_CORPUS): ChatMessage[][] {
  const r = rng(o.seed);
  return Array.from({ length: o.traces }, (_, i) => toolTrace(arithmeticProblem('train', 1_000_000 + i), r, o));
}
