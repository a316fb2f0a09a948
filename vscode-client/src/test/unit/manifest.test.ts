// Unit tests: package.json contributions mirror the server's settings and commands.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { CLIENT_DEFAULTS, CLIENT_PROVIDED_SETTINGS, SERVER_DEFAULTS } from '../../settings';

const root = path.resolve(__dirname, '..', '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
/** package.json of an installed dependency (workspaces hoist it to the root node_modules). */
function findPackage(name: string): string {
  for (let dir = root; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name, 'package.json');
    if (fs.existsSync(candidate)) {
      return candidate;
    }
    if (path.dirname(dir) === dir) {
      throw new Error(`${name} is not installed (run npm ci)`);
    }
  }
}

const properties: Record<string, Record<string, unknown>> = manifest.contributes.configuration.properties;

test('every server and client setting is contributed with the same default', () => {
  for (const [name, value] of Object.entries({ ...SERVER_DEFAULTS, ...CLIENT_DEFAULTS })) {
    if ((CLIENT_PROVIDED_SETTINGS as readonly string[]).includes(name)) {
      assert.ok(!properties[`adaptrack.${name}`], `adaptrack.${name} is filled in by the client and must not be a setting`);
      continue;
    }
    const property = properties[`adaptrack.${name}`];
    assert.ok(property, `adaptrack.${name} is not contributed`);
    assert.deepEqual(property.default, value, `default of adaptrack.${name}`);
    assert.ok(typeof property.markdownDescription === 'string' && property.markdownDescription.length > 10, `adaptrack.${name} needs a markdownDescription`);
    assert.ok(typeof property.scope === 'string', `adaptrack.${name} needs a scope`);
  }
});

test('no contributed setting is unknown to the mapping', () => {
  const known = new Set([...Object.keys(SERVER_DEFAULTS), ...Object.keys(CLIENT_DEFAULTS), 'trace.server']);
  for (const key of Object.keys(properties)) {
    assert.ok(key.startsWith('adaptrack.'), key);
    assert.ok(known.has(key.slice('adaptrack.'.length)), `${key} is contributed but not mapped`);
  }
});

test('enums carry one description per value', () => {
  for (const [key, property] of Object.entries(properties)) {
    if (Array.isArray(property.enum)) {
      assert.ok(Array.isArray(property.enumDescriptions), `${key} lacks enumDescriptions`);
      assert.equal((property.enumDescriptions as unknown[]).length, property.enum.length, key);
      assert.ok(property.enum.includes(property.default), `${key}: default not in enum`);
    }
  }
});

test('trustRemoteCode can only be enabled in user settings; executables are restricted in untrusted workspaces', () => {
  assert.equal(properties['adaptrack.trustRemoteCode'].scope, 'machine');
  const restricted: string[] = manifest.capabilities.untrustedWorkspaces.restrictedConfigurations;
  for (const key of ['adaptrack.serverInterpreter', 'adaptrack.pythonPath', 'adaptrack.model']) {
    assert.ok(restricted.includes(key), key);
  }
});

test('commands, activation, engine and entry point', () => {
  const commands = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  assert.deepEqual(commands, ['adaptrack.clearApiKey', 'adaptrack.restart', 'adaptrack.setApiKey', 'adaptrack.setUpServer', 'adaptrack.showLogs', 'adaptrack.toggle']);
  assert.deepEqual(manifest.activationEvents, ['onLanguage:python']);
  assert.equal(manifest.main, './dist/extension.js');
  const client = JSON.parse(fs.readFileSync(findPackage('vscode-languageclient'), 'utf8'));
  assert.equal(client.engines.vscode, manifest.engines.vscode, 'engines.vscode must match vscode-languageclient');
});
