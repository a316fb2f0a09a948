// Unit tests: the server's stderr lines reach the output channel at their logged level.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';

import { LevelledLog, pipeServerStderr, ServerLogReader } from '../../serverLog';

function recorder(): { log: LevelledLog; lines: string[] } {
  const lines: string[] = [];
  const log: LevelledLog = {
    debug: (message) => lines.push(`[debug] ${message}`),
    info: (message) => lines.push(`[info] ${message}`),
    warn: (message) => lines.push(`[warn] ${message}`),
    error: (message) => lines.push(`[error] ${message}`),
  };
  return { log, lines };
}

test('each record is logged at its level, without its timestamp', () => {
  const { log, lines } = recorder();
  const reader = new ServerLogReader();
  for (const line of [
    '2026-11-23 19:40:01,123 INFO adaptrack_lsp.lsp_server.server: loading tiny on cpu',
    '2026-11-23 19:40:01,124 DEBUG adaptrack_lsp.completion: 3 candidates',
    '2026-11-23 19:40:02,000 WARNING adaptrack_lsp.config: unknown setting "modle"',
    '2026-11-23 19:40:03,500 ERROR adaptrack_lsp.lsp_server.server: inline completion failed',
    'Traceback (most recent call last):',
    '  File "x.py", line 1, in <module>',
    'ValueError: boom',
    '2026-11-23 19:40:04,000 CRITICAL adaptrack_lsp: out of memory',
    '2026-11-23 19:40:05,000 INFO adaptrack_lsp.lsp_server.server: ready',
    'a second line of the ready message',
  ]) {
    reader.write(line, log);
  }
  assert.deepEqual(lines, [
    '[info] adaptrack_lsp.lsp_server.server: loading tiny on cpu',
    '[debug] adaptrack_lsp.completion: 3 candidates',
    '[warn] adaptrack_lsp.config: unknown setting "modle"',
    '[error] adaptrack_lsp.lsp_server.server: inline completion failed',
    '[error] Traceback (most recent call last):',
    '[error]   File "x.py", line 1, in <module>',
    '[error] ValueError: boom',
    '[error] adaptrack_lsp: out of memory',
    '[info] adaptrack_lsp.lsp_server.server: ready',
    '[info] a second line of the ready message',
  ]);
});

test('a traceback no record announced is an error; plain lines are info', () => {
  const { log, lines } = recorder();
  const reader = new ServerLogReader();
  for (const line of ['some library note', 'Traceback (most recent call last):', 'ImportError: no module']) {
    reader.write(line, log);
  }
  assert.deepEqual(lines, ['[info] some library note', '[error] Traceback (most recent call last):', '[error] ImportError: no module']);
});

test('pipeServerStderr reads a stream line by line', async () => {
  const { log, lines } = recorder();
  const stream = new PassThrough();
  pipeServerStderr(stream, log);
  stream.write('2026-11-23 19:40:01,123 INFO a: one\r\n2026-11-23 19:40:01,124 WAR');
  stream.end('NING b: two\n');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(lines, ['[info] a: one', '[warn] b: two']);
});
