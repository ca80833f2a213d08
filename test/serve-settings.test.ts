// serve's settings: config file < environment < flags, for the learning sections (serveSettings).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { CliError } from '../src/cli/args.js';
import { serveSettings } from '../src/cli/serve-options.js';
import { freshDir } from './helpers/gateway.js';

function configFile(config: unknown): string {
  const path = join(freshDir('serve-settings-'), 'config.json');
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const withJudgeUrl = {
  judge: { url: 'http://127.0.0.1:8000/v1', model: 'judge', hintQuorum: 'any' },
  learning: { wRl: 0.5, teacherVersion: 'current' },
};

test('the config file sets the judge endpoint, hint quorum, weights and teacher; flags override them', () => {
  const fromFile = serveSettings({ config: configFile(withJudgeUrl) }).learning;
  assert.deepEqual(
    [fromFile.judge.kind, fromFile.judge.url, fromFile.judge.model, fromFile.judge.hintQuorum],
    ['openai', 'http://127.0.0.1:8000/v1', 'judge', 'any'],
  );
  assert.deepEqual([fromFile.learn.wRl, fromFile.learn.wOpd, fromFile.learn.teacherVersion], [0.5, 1, 'current']);

  const flags = serveSettings({
    config: configFile(withJudgeUrl),
    judge: 'self',
    'rl-weight': '2',
    'opd-weight': '0.25',
  }).learning;
  assert.deepEqual(
    [flags.judge.kind, flags.judge.url, flags.judge.model],
    ['self', null, null],
    "--judge self wins over the file's endpoint",
  );
  assert.deepEqual([flags.learn.wRl, flags.learn.wOpd], [2, 0.25]);
});

test('defaults: self-judge, majority hint quorum, weights 1, the frozen base as teacher', () => {
  const { learning } = serveSettings({});
  assert.deepEqual(
    [
      learning.judge.kind,
      learning.judge.hintQuorum,
      learning.learn.wRl,
      learning.learn.wOpd,
      learning.learn.teacherVersion,
    ],
    ['self', 'majority', 1, 1, 0],
  );
});

test('bad learning values stop with a message naming the setting', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [
      { config: configFile({ judge: { hintQuorum: 'some' } }) },
      /judge\.hintQuorum must be "majority" or "any", got "some"/,
    ],
    [
      { config: configFile({ learning: { teacherVersion: 3 } }) },
      /teacherVersion must be 0 \(the frozen base\) or "current"/,
    ],
    [{ config: configFile({ learning: { method: 'rl', wRl: 0 } }) }, /rl needs wRl above 0/],
    [{ 'rl-weight': '-1' }, /--rl-weight must be a number >= 0, got "-1"/],
    [{ 'opd-weight': 'x' }, /--opd-weight must be a number >= 0, got "x"/],
  ];
  for (const [flags, message] of cases) {
    assert.throws(
      () => serveSettings(flags),
      (e: Error) => e instanceof CliError && message.test(e.message),
      JSON.stringify(flags),
    );
  }
});
