// Runs the extension-host mocha suite named in $ADAPTRACK_WEB_RUNNER (a JSON file:
// { "mocha": <path of the mocha package>, "files": [...], "timeoutMs": n, "result": <path> })
// once the workbench has started, and writes the outcome to `result` as JSON.
const fs = require('fs');

function activate() {
  const configPath = process.env.ADAPTRACK_WEB_RUNNER;
  if (!configPath || !fs.existsSync(configPath)) {
    return;
  }
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const Mocha = require(config.mocha);
  const mocha = new Mocha({ ui: 'tdd', timeout: config.timeoutMs, color: false });
  for (const file of config.files) {
    mocha.addFile(file);
  }
  const tests = [];
  const write = (extra) =>
    fs.writeFileSync(config.result, JSON.stringify({ tests, ...extra }, null, 1));
  try {
    const runner = mocha.run((failures) => write({ done: true, failures }));
    runner.on('pass', (test) => tests.push({ title: test.fullTitle(), state: 'passed', ms: test.duration }));
    runner.on('fail', (test, error) =>
      tests.push({ title: test.fullTitle(), state: 'failed', error: String((error && error.stack) || error) }),
    );
    runner.on('pending', (test) => tests.push({ title: test.fullTitle(), state: 'pending' }));
  } catch (error) {
    write({ done: true, failures: -1, error: String((error && error.stack) || error) });
  }
}

function deactivate() {}

module.exports = { activate, deactivate };
