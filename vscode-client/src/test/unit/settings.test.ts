// Unit tests: settings -> initializationOptions / didChangeConfiguration mapping.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as path from 'node:path';

import {
  CLIENT_SETTING_NAMES,
  ConfigurationLike,
  expandPathVariables,
  reactionToChange,
  readSettings,
  SERVER_DEFAULTS,
  SERVER_SETTING_NAMES,
  toDidChangeConfigurationParams,
  toInitializationOptions,
} from '../../settings';

function config(values: Record<string, unknown>): ConfigurationLike {
  return { get: <T>(name: string) => values[name] as T | undefined };
}

test('defaults: initializationOptions equal the server defaults, with explicit nulls', () => {
  const options = toInitializationOptions(readSettings(config({})));
  assert.deepEqual(options, {
    model: 'builtin',
    device: 'auto',
    dtype: 'auto',
    kvCache: 'auto',
    threads: null,
    gpuLayers: null,
    decoder: 'adaptrack',
    listDecoder: 'exact',
    temperature: 0,
    numSamples: 5,
    maxNewTokens: 48,
    contextTokens: null,
    maxBacktrackDistance: null,
    topPValidity: 1,
    pythonPath: null,
    apiSnapshot: null,
    versionTargets: [],
    runtimeIntrospection: true,
    keywordArguments: true,
    timeoutMs: 3000,
    multiline: false,
    diagnostics: 'warning',
    avoidDeprecated: false,
    syntaxConstraint: true,
    trustRemoteCode: false,
    backend: 'auto',
    endpoint: '',
    tokenizer: '',
    serverModel: '',
    apiKeyEnv: 'ADAPTRACK_API_KEY',
    serverTopLogprobs: 20,
    serverLookahead: 32,
    serverTimeoutMs: 10000,
    trustedWorkspace: false,
  });
});

test('trustedWorkspace is VS Code workspace trust, never a configured value', () => {
  const fromFile = readSettings(config({ trustedWorkspace: true }));
  assert.equal(toInitializationOptions(fromFile).trustedWorkspace, false, 'a settings file cannot grant trust');
  assert.equal(toInitializationOptions(fromFile, { workspaceTrusted: true }).trustedWorkspace, true);
  assert.equal(toDidChangeConfigurationParams(fromFile, { workspaceTrusted: false }).settings.adaptrack.trustedWorkspace, false);
});

test('client-only settings never reach the server', () => {
  const options = toInitializationOptions(
    readSettings(config({ enable: false, serverInterpreter: '/usr/bin/python3', serverArgs: ['-v'], model: 'tiny' })),
  ) as unknown as Record<string, unknown>;
  for (const name of CLIENT_SETTING_NAMES) {
    assert.ok(!(name in options), `${name} leaked into initializationOptions`);
  }
  assert.deepEqual(Object.keys(options), SERVER_SETTING_NAMES);
  assert.equal(options.model, 'tiny');
});

test('user values pass through unchanged, camelCase', () => {
  const values = {
    model: 'tiny',
    device: 'cuda:1',
    dtype: 'bfloat16',
    decoder: 'cars',
    listDecoder: 'rs',
    temperature: 0.7,
    numSamples: 3,
    maxNewTokens: 16,
    maxBacktrackDistance: 4,
    topPValidity: 0.95,
    runtimeIntrospection: false,
    timeoutMs: 60000,
    multiline: true,
    syntaxConstraint: false,
    trustRemoteCode: true,
  };
  const options = toInitializationOptions(readSettings(config(values)));
  const engine = {
    backend: 'auto', endpoint: '', tokenizer: '', serverModel: '', apiKeyEnv: 'ADAPTRACK_API_KEY',
    serverTopLogprobs: 20, serverLookahead: 32, serverTimeoutMs: 10000,
  };
  assert.deepEqual(options, { ...values, kvCache: 'auto', threads: null, gpuLayers: null, contextTokens: null, pythonPath: null, apiSnapshot: null, versionTargets: [], keywordArguments: true, diagnostics: 'warning', avoidDeprecated: false, ...engine, trustedWorkspace: false });
});

test('invalid values are passed as given: the server validates and names them', () => {
  const options = toInitializationOptions(readSettings(config({ temperature: -3, device: 'tpu' })));
  assert.equal(options.temperature, -3);
  assert.equal(options.device, 'tpu');
});

test('path settings: variables and ~ are expanded, empty strings become null', () => {
  const settings = readSettings(
    config({ pythonPath: '${workspaceFolder}/.venv/bin/python', apiSnapshot: '~/snapshots/tf.json' }),
  );
  const options = toInitializationOptions(settings, { workspaceFolder: '/proj', userHome: '/home/u' });
  assert.equal(options.pythonPath, '/proj/.venv/bin/python');
  assert.equal(options.apiSnapshot, path.join('/home/u', 'snapshots/tf.json'));

  const empty = toInitializationOptions(readSettings(config({ pythonPath: '  ', apiSnapshot: '' })));
  assert.equal(empty.pythonPath, null);
  assert.equal(empty.apiSnapshot, null);
});

test('expandPathVariables: env, userHome, and clear errors', () => {
  assert.equal(expandPathVariables('${env:ADAPTRACK_X}/bin', { env: { ADAPTRACK_X: '/opt/x' } }), '/opt/x/bin');
  assert.equal(expandPathVariables('${userHome}/a', { userHome: '/h' }), '/h/a');
  assert.equal(expandPathVariables('/plain/path'), '/plain/path');
  assert.throws(() => expandPathVariables('${workspaceFolder}/x', {}), /needs an open workspace folder/);
  assert.throws(() => expandPathVariables('${nonsense}/x', {}), /unknown variable \$\{nonsense\}/);
});

test('didChangeConfiguration wraps the same object under "adaptrack"', () => {
  const settings = readSettings(config({ model: 'tiny', numSamples: 2 }));
  const params = toDidChangeConfigurationParams(settings);
  assert.deepEqual(params, { settings: { adaptrack: toInitializationOptions(settings) } });
  assert.equal(params.settings.adaptrack.numSamples, 2);
});

test('reactionToChange: restart for launch settings, notify for server settings, start/stop for enable', () => {
  const base = readSettings(config({}));
  assert.equal(reactionToChange(base, { ...base }), 'none');
  assert.equal(reactionToChange(base, { ...base, model: 'tiny' }), 'notify');
  assert.equal(reactionToChange(base, { ...base, temperature: 1 }), 'notify');
  assert.equal(reactionToChange(base, { ...base, serverInterpreter: '/x/python' }), 'restart');
  assert.equal(reactionToChange(base, { ...base, serverArgs: ['-v'] }), 'restart');
  assert.equal(reactionToChange(base, { ...base, apiKeyEnv: 'TEAM_LLM_KEY' }), 'restart');
  assert.equal(reactionToChange(base, { ...base, enable: false }), 'stop');
  const disabled = { ...base, enable: false };
  assert.equal(reactionToChange(disabled, { ...disabled, enable: true }), 'start');
  assert.equal(reactionToChange(disabled, { ...disabled, model: 'tiny' }), 'none');
});

test('SERVER_DEFAULTS is frozen', () => {
  assert.ok(Object.isFrozen(SERVER_DEFAULTS));
});
