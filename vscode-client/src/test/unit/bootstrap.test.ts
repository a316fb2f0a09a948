// Unit tests: the server's private environment, against real interpreters, real venvs
// and real pip runs (a small wheel made here; "offline" is a package index on a closed
// local port with pip's configuration files ignored).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

import { BASE_CANDIDATES, bundledWheel, envState, findBasePython, hasServer, looksOffline, manualCommand, privateEnv, pythonVersion, SetupError, setUp } from '../../bootstrap';
import { resolveInterpreter } from '../../server';

const PYTHON = process.platform === 'win32' ? 'python' : 'python3';
const posixOnly = process.platform === 'win32' ? 'POSIX shell scripts' : false;

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'adaptrack-bootstrap-'));
}

/** A wheel named adaptrack_lsp-VERSION that installs a package importing as adaptrack_lsp.cli. */
function makeWheel(folder: string, version: string, requires: string[] = []): string {
  const script = `
import sys, zipfile
path, version, requires = sys.argv[1], sys.argv[2], sys.argv[3:]
info = f"adaptrack_lsp-{version}.dist-info"
with zipfile.ZipFile(path, "w") as wheel:
    wheel.writestr("adaptrack_lsp/__init__.py", f"__version__ = {version!r}\\n")
    wheel.writestr("adaptrack_lsp/cli.py", "")
    wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\\nName: adaptrack-lsp\\nVersion: " + version + "\\n" + "".join(f"Requires-Dist: {r}\\n" for r in requires))
    wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    wheel.writestr(f"{info}/RECORD", "")
`;
  const wheel = path.join(folder, `adaptrack_lsp-${version}-py3-none-any.whl`);
  execFileSync(PYTHON, ['-c', script, wheel, version, ...requires]);
  return wheel;
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** pip with no configuration file, no find-links and an index nobody answers on. */
async function offlineEnv(): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('PIP_')) {
      delete env[name];
    }
  }
  return { ...env, PIP_CONFIG_FILE: os.devNull, PIP_INDEX_URL: `http://127.0.0.1:${await closedPort()}/simple` };
}

test('the private environment lives in the storage folder and its wheel in the extension', () => {
  const storage = tempDir();
  const env = privateEnv(storage);
  assert.equal(env.dir, path.join(storage, 'server-env'));
  assert.equal(env.python, path.join(storage, 'server-env', 'bin', 'python'));
  const extension = tempDir();
  assert.equal(bundledWheel(extension), undefined, 'a development build carries no wheel');
  fs.mkdirSync(path.join(extension, 'server'));
  fs.writeFileSync(path.join(extension, 'server', 'adaptrack_lsp-0.1.0-py3-none-any.whl'), '');
  fs.writeFileSync(path.join(extension, 'server', 'notes.txt'), '');
  assert.equal(bundledWheel(extension), path.join(extension, 'server', 'adaptrack_lsp-0.1.0-py3-none-any.whl'));
  assert.equal(resolveInterpreter({ serverInterpreter: null, serverArgs: [], privateInterpreter: env.python, pythonExtensionInterpreter: '/x/python' }).source, 'private-env');
  assert.equal(resolveInterpreter({ serverInterpreter: '/y/python', serverArgs: [], privateInterpreter: env.python }).source, 'setting');
});

test('interpreters: versions, the server import, and Python older than 3.10 passed over', { skip: posixOnly }, async () => {
  const version = await pythonVersion(PYTHON);
  assert.ok(version && version[0] === 3, String(version));
  assert.equal(await pythonVersion('/nonexistent/python'), undefined);
  assert.equal(await hasServer('/nonexistent/python'), false);
  const bin = tempDir();
  const old = path.join(bin, 'python3.8-fake');
  fs.writeFileSync(old, '#!/bin/sh\necho "3 8"\n', { mode: 0o755 });
  const found = await findBasePython([old]);
  assert.deepEqual(found.tooOld, [`${old} (Python 3.8)`]);
  assert.ok(found.python && found.python !== old);
});

test('only Python older than 3.10 on PATH: one message naming the fix, nothing created', { skip: posixOnly }, async () => {
  const bin = tempDir();
  for (const name of BASE_CANDIDATES) {
    fs.writeFileSync(path.join(bin, name), '#!/bin/sh\necho "3 9"\n', { mode: 0o755 });
  }
  const storage = tempDir();
  const saved = process.env.PATH;
  process.env.PATH = bin;
  try {
    await assert.rejects(
      setUp(privateEnv(storage), '/x/adaptrack_lsp-0.1.0-py3-none-any.whl', [], () => undefined, () => undefined),
      (error: Error) => error instanceof SetupError && /needs Python 3\.10 or newer \(only .*python3 \(Python 3\.9\)/.test(error.message) && /Set Up Server/.test(error.message),
    );
  } finally {
    process.env.PATH = saved;
  }
  assert.equal(fs.existsSync(privateEnv(storage).dir), false);
});

test('storage that cannot be written: one message with the manual install', async () => {
  const file = path.join(tempDir(), 'a-file');
  fs.writeFileSync(file, '');
  const storage = path.join(file, 'storage'); // below a file: ENOTDIR, as a read-only storage gives EROFS/EACCES
  await assert.rejects(
    setUp(privateEnv(storage), '/x/adaptrack_lsp-0.1.0-py3-none-any.whl', [PYTHON], () => undefined, () => undefined),
    (error: Error) => error instanceof SetupError && error.message.includes(`cannot write the extension's storage ${file}`) && error.message.includes('pip install') && error.message.includes('adaptrack.serverInterpreter'),
  );
});

test('set up, current, upgraded by another wheel, broken by deleted files, recreated', { skip: posixOnly, timeout: 300000 }, async () => {
  const storage = tempDir();
  const wheels = tempDir();
  const env = privateEnv(storage);
  const first = makeWheel(wheels, '0.0.1');
  assert.equal(await envState(env, first), 'missing');
  const said: string[] = [];
  const lines: string[] = [];
  await setUp(env, first, [PYTHON], (m) => said.push(m), (l) => lines.push(l), { env: await offlineEnv() });
  assert.ok(said.some((m) => m.startsWith('creating the environment')) && said.some((m) => m.startsWith('installing adaptrack_lsp-0.0.1')), said.join('\n'));
  assert.ok(lines.some((l) => l.includes('Successfully installed adaptrack-lsp-0.0.1')), lines.join('\n'));
  assert.equal(await envState(env, first), 'current');

  const second = makeWheel(wheels, '0.0.2');
  assert.equal(await envState(env, second), 'outdated');
  await setUp(env, second, [PYTHON], () => undefined, () => undefined, { upgrade: true, env: await offlineEnv() });
  assert.equal(await envState(env, second), 'current');
  const clean = { ...process.env };
  delete clean.PYTHONPATH; // the test runner's own sources must not stand in for the environment's
  const installed = execFileSync(env.python, ['-c', 'import adaptrack_lsp; print(adaptrack_lsp.__version__)'], { env: clean }).toString().trim();
  assert.equal(installed, '0.0.2');

  const site = execFileSync(env.python, ['-c', 'import adaptrack_lsp, os; print(os.path.dirname(adaptrack_lsp.__file__))'], { env: clean }).toString().trim();
  fs.rmSync(site, { recursive: true });
  assert.equal(await envState(env, second), 'broken');
  await setUp(env, second, [PYTHON], () => undefined, () => undefined, { env: await offlineEnv() });
  assert.equal(await envState(env, second), 'current');
});

test('offline: pip cannot reach the index, one message with the exact manual command, no stamp', { skip: posixOnly, timeout: 300000 }, async () => {
  const storage = tempDir();
  const wheel = makeWheel(tempDir(), '0.0.3', ['adaptrack-test-dependency-that-needs-the-index>=1']);
  const env = privateEnv(storage);
  await assert.rejects(
    setUp(env, wheel, [PYTHON], () => undefined, () => undefined, { env: await offlineEnv() }),
    (error: Error) => {
      assert.ok(error instanceof SetupError);
      assert.match(error.message, /could not be reached \(offline\?\)/);
      assert.ok(error.message.includes(manualCommand(PYTHON, env, wheel)), error.message);
      return true;
    },
  );
  assert.equal(await envState(env, wheel), 'missing', 'a failed setup is not taken for a finished one');
  assert.ok(looksOffline('NewConnectionError: Failed to establish a new connection'));
  assert.ok(!looksOffline('ERROR: Invalid requirement'));
});
