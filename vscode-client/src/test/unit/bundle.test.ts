// Unit test: the esbuild bundle loads (every runtime dependency is inside it; only
// `vscode` stays external) and exports activate/deactivate.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Module from 'node:module';

const bundle = path.resolve(__dirname, '..', '..', '..', 'dist', 'extension.js');

test('dist/extension.js loads with only "vscode" provided by the host', { skip: fs.existsSync(bundle) ? false : 'run `npm run bundle` first' }, () => {
  const requested = new Set<string>();
  // a stand-in for the `vscode` module: any property access yields a callable stub
  const stub: unknown = new Proxy(function () {}, {
    get: (_target, property) => (property === '__esModule' ? true : stub),
    apply: () => stub,
    construct: () => stub as object,
  });
  const moduleApi = Module as unknown as { _load: (request: string, parent: unknown, isMain: boolean) => unknown };
  const originalLoad = moduleApi._load;
  moduleApi._load = function (request: string, parent: unknown, isMain: boolean) {
    requested.add(request);
    if (request === 'vscode') {
      return stub;
    }
    return originalLoad.call(this, request, parent, isMain);
  };
  try {
    delete require.cache[bundle];
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const extension = require(bundle);
    assert.equal(typeof extension.activate, 'function');
    assert.equal(typeof extension.deactivate, 'function');
  } finally {
    moduleApi._load = originalLoad;
  }
  const builtins = new Set(Module.builtinModules);
  const external = [...requested].filter((name) => name !== 'vscode' && name !== bundle && !builtins.has(name.replace(/^node:/, '')));
  assert.deepEqual(external, [], 'the bundle must not require packages at run time');
});
