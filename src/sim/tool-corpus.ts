// The pre-training corpus of the agents benchmark's base policy: tool-call traces on generated
// arithmetic word problems (src/env/arithmetic-tasks.ts), in exactly the messages the tool-call
// environment and the gateway exchange: the environment's system prompt and calculator tool, the
// question, one calculator call per operation (a three-operation problem takes three, each after
// the first on the previous call's result), the tool's results, and "Answer: N". The traces carry the base model's
// mistakes at stated rates, so the base solves some tasks and learning has room:
//   wrong operator   a call applies another operator (the judge can see it), per call
//   wrong number     a call mistypes the question's number it uses, per call
//   miscopied answer the last call is right but the final answer is not its result

import type { ChatMessage } from '../chat/messages.js';
import { arithmeticProblem, numbersIn, type ArithmeticProblem } from '../env/arithmetic-tasks.js';
import { evaluate, formatNumber } from '../env/calculator.js';
import { TOOL_CALL_SYSTEM_PROMPT } from '../env/tool-call.js';
import { pick, rng, type Rng } from './random.js';

export interface ToolCorpusOptions {
  seed: number;
  traces: number;
  /** Chance that a call uses a wrong operator. */
  wrongOperator: number;
  /** Chance that a call mistypes the question's number it uses. */
  wrongNumber: number;
  /** Chance that the final answer is not the call's result. */
  miscopiedAnswer: number;
}

export const DEFAULT_TOOL_CORPUS: ToolCorpusOptions = {
  seed: 1,
  traces: 6000,
  wrongOperator: 0.3,
  wrongNumber: 0.1,
  miscopiedAnswer: 0.2,
};

/** One trace: the episode's messages as the environment would send them after it ended. */
export function toolTrace(problem: ArithmeticProblem, r: Rng, o: ToolCorpusOptions): ChatMessage[] {
  const numbers = numbersIn(problem.question);
  const ops = [...problem.expression.matchAll(/ ([-+*]) /g)].map((m) => m[1]!);
  const messages: ChatMessage[] = [
    { role: 'system', content: TOOL_CALL_SYSTEM_PROMPT },
    { role: 'user', content: problem.question },
  ];
  let result = String(numbers[0]);
  ops.forEach((correct, i) => {
    const op =
      r.next() < o.wrongOperator
        ? pick(
            r,
            OPERATORS.filter((x) => x !== correct),
          )
        : correct;
    // A mistyped number: one the question gave (the first call uses two of them, later ones one).
    let left = result;
    let right = String(numbers[i + 1]);
    if (r.next() < o.wrongNumber) {
      const mistyped = (x: string) => String(Number(x) + 1 + Math.floor(r.next() * 9));
      if (i === 0 && r.next() < 0.5) left = mistyped(left);
      else right = mistyped(right);
    }
    const expression = `${left} ${op} ${right}`;
    result = formatNumber(evaluate(expression));
    const id = `call_${i}`;
    messages.push(
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id, type: 'function', function: { name: 'calculator', arguments: JSON.stringify({ expression }) } },
        ],
      },
      { role: 'tool', tool_call_id: id, name: 'calculator', content: result },
    );
  });
  const answer = r.next() < o.miscopiedAnswer ? String(Number(result) + pick(r, [-10, -1, 1, 10, 100])) : result;
  messages.push({ role: 'assistant', content: `Answer: ${answer}` });
  return messages;
}

const OPERATORS = ['+', '-', '*'];

/**
 * The corpus: traces on positions of a split of their own (`train`, from position 1,000,000 on),
 * so neither the benchmark's training tasks nor its held-out tasks are ever pre-trained on.
 */
export function buildToolCorpus(o: ToolCorpusOptions = DEFAULT_TOOL_CORPUS): ChatMessage[][] {
  const r = rng(o.seed);
  return Array.from({ length: o.traces }, (_, i) => toolTrace(arithmeticProblem('train', 1_000_000 + i), r, o));
}
