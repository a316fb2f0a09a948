// Unit tests: which interpreter runs the server, and the exact launch command.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';

import { apiKeyEnvironment, buildServerLaunch, describeLaunch, FALLBACK_INTERPRETER, NEUTRAL_CWD, resolveInterpreter } from '../../server';
import * as fs from 'node:fs';

test('the serverInterpreter setting wins over the Python extension', () => {
  const resolved = resolveInterpreter({
    serverInterpreter: '/opt/venv/bin/python',
    serverArgs: [],
    pythonExtensionInterpreter: '/usr/bin/python3.12',
  });
  assert.deepEqual(resolved, { interpreter: '/opt/venv/bin/python', source: 'setting' });
});

test('without the setting, the Python extension interpreter is used', () => {
  for (const serverInterpreter of [null, '', '   ']) {
    const resolved = resolveInterpreter({ serverInterpreter, serverArgs: [], pythonExtensionInterpreter: '/envs/a/bin/python' });
    assert.deepEqual(resolved, { interpreter: '/envs/a/bin/python', source: 'python-extension' });
  }
});

test('without both, python3 is the fallback', () => {
  for (const pythonExtensionInterpreter of [undefined, null, '']) {
    const resolved = resolveInterpreter({ serverInterpreter: null, serverArgs: [], pythonExtensionInterpreter });
    assert.deepEqual(resolved, { interpreter: FALLBACK_INTERPRETER, source: 'fallback' });
  }
  if (process.platform !== 'win32') {
    assert.equal(FALLBACK_INTERPRETER, 'python3');
  }
});

test('a setting that expands to nothing counts as unset', () => {
  const resolved = resolveInterpreter({
    serverInterpreter: '${env:ADAPTRACK_UNSET_VARIABLE}',
    serverArgs: [],
    pythonExtensionInterpreter: '/envs/b/bin/python',
    pathContext: { env: {} },
  });
  assert.deepEqual(resolved, { interpreter: '/envs/b/bin/python', source: 'python-extension' });
});

test('the setting expands ${workspaceFolder}', () => {
  const resolved = resolveInterpreter({
    serverInterpreter: '${workspaceFolder}/.venv/bin/python',
    serverArgs: [],
    pathContext: { workspaceFolder: '/w' },
  });
  assert.equal(resolved.interpreter, '/w/.venv/bin/python');
});

test('launch: python -m adaptrack_lsp serve, extra args after serve, cwd never the workspace, unbuffered', () => {
  const launch = buildServerLaunch({
    serverInterpreter: '/venv/bin/python',
    serverArgs: ['-v', '--log-file', '/tmp/a.log'],
    pathContext: { workspaceFolder: '/w' },
    env: { PATH: '/usr/bin' },
  });
  assert.equal(launch.command, '/venv/bin/python');
  assert.deepEqual(launch.args, ['-m', 'adaptrack_lsp', 'serve', '-v', '--log-file', '/tmp/a.log']);
  assert.equal(launch.cwd, NEUTRAL_CWD);
  assert.deepEqual(launch.env, { PATH: '/usr/bin', PYTHONUNBUFFERED: '1' });
  assert.ok(!launch.args.includes('--stdio'), 'the server speaks stdio by default; no extra flag');
  assert.equal(describeLaunch(launch), '/venv/bin/python -m adaptrack_lsp serve -v --log-file /tmp/a.log (interpreter from setting)');
});

test('launch inherits this process environment by default', () => {
  const launch = buildServerLaunch({ serverInterpreter: null, serverArgs: [] });
  assert.equal(launch.env.PATH, process.env.PATH);
  assert.equal(launch.cwd, NEUTRAL_CWD);
  assert.equal(launch.interpreterSource, 'fallback');
});

test('the working directory holds no Python module that `python -m` could import in place of the standard library', () => {
  // python -m puts the working directory first on sys.path: a workspace token.py would run in the server
  const launch = buildServerLaunch({ serverInterpreter: null, serverArgs: [], pathContext: { workspaceFolder: '/w' } });
  assert.notEqual(launch.cwd, '/w');
  const pythonFiles = fs.readdirSync(launch.cwd as string).filter((name) => name.endsWith('.py') || name.endsWith('.pth'));
  assert.deepEqual(pythonFiles, []);
});

test('an API key from secret storage reaches the server in the named variable and never the launch line', () => {
  const key = 'sk-test-5c1d';
  const launch = buildServerLaunch({
    serverInterpreter: '/opt/venv/bin/python',
    serverArgs: ['-v'],
    env: { PATH: '/usr/bin' },
    secretEnv: apiKeyEnvironment('TEAM_LLM_KEY', key),
  });
  assert.equal(launch.env.TEAM_LLM_KEY, key);
  assert.ok(!describeLaunch(launch).includes(key));
  assert.deepEqual(apiKeyEnvironment('TEAM_LLM_KEY', undefined), {});
  assert.deepEqual(apiKeyEnvironment('not a name', key), {});
});
