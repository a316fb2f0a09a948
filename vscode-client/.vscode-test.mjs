// Extension-host tests (`npm run test:extension-host`): downloads VS Code, installs
// nothing else, opens test-fixtures/ as the workspace and runs out/test/suite/*.test.js.
// Needs a machine that can download VS Code (and a display, or xvfb-run on Linux).
import { defineConfig } from '@vscode/test-cli';

export default defineConfig({
  label: 'extension-host',
  files: 'out/test/suite/**/*.test.js',
  workspaceFolder: './test-fixtures',
  version: 'stable',
  // the fixture workspace sets restricted settings (serverInterpreter): trust it, and
  // keep other installed extensions out of the test host
  launchArgs: ['--disable-workspace-trust', '--disable-extensions'],
  mocha: { ui: 'tdd', timeout: 300000 },
  env: { ADAPTRACK_PYTHON: process.env.ADAPTRACK_PYTHON ?? '' },
});
