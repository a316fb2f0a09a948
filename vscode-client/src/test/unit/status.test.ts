// Unit tests: server state from adaptrack/status notifications and loading progress.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';

import { LOADING_PROGRESS_TITLE, StatusModel } from '../../status';

test('adaptrack/status notifications drive the state', () => {
  const model = new StatusModel();
  const seen: string[] = [];
  model.onChange((m) => seen.push(m.state));
  model.applyNotification({ state: 'loading', message: 'loading tiny' });
  assert.equal(model.view().text, '$(sync~spin) adaptrack');
  model.applyNotification({ state: 'ready', message: 'tiny on cpu' });
  assert.equal(model.view().text, '$(check) adaptrack');
  assert.match(model.view().tooltip, /ready: tiny on cpu/);
  model.applyNotification({ state: 'error', message: 'no such model' });
  assert.ok(model.view().isError);
  assert.deepEqual(seen, ['loading', 'ready', 'error']);
});

test('indexing is a state of its own, and its end asks for completions again', () => {
  const model = new StatusModel();
  model.applyNotification({ state: 'ready', message: 'tiny on cpu' });
  let previous = model.state;
  model.applyNotification({ state: 'indexing', message: 'computing the API members of numpy' });
  assert.equal(model.state, 'indexing');
  assert.ok(!model.view().isError);
  assert.match(model.view().tooltip, /reading the installed APIs: computing the API members of numpy/);
  assert.ok(!model.indexed(previous));
  previous = model.state;
  model.applyNotification({ state: 'ready', message: 'tiny on cpu' });
  assert.ok(model.indexed(previous));
  previous = model.state;
  model.applyNotification({ state: 'ready', message: 'tiny on cpu' });
  assert.ok(!model.indexed(previous)); // ready -> ready: nothing to ask again

  // the client's callback runs exactly when an indexing wait ends
  let askedAgain = 0;
  const askAgain = () => {
    askedAgain += 1;
  };
  model.applyNotification({ state: 'indexing', message: 'computing the API members of torch' }, askAgain);
  assert.equal(askedAgain, 0);
  model.applyNotification({ state: 'ready', message: 'tiny on cpu' }, askAgain);
  assert.equal(askedAgain, 1);
  model.applyNotification({ state: 'ready', message: 'tiny on cpu' }, askAgain);
  model.applyNotification({ state: 'degraded', message: 'no interpreter' }, askAgain);
  assert.equal(askedAgain, 1);
});

test('malformed notifications become an error state, not an exception', () => {
  const model = new StatusModel();
  model.applyNotification({ state: 'sleeping' });
  assert.equal(model.state, 'error');
  assert.match(model.message, /malformed adaptrack\/status/);
  model.applyNotification(null);
  assert.equal(model.state, 'error');
});

test('model-loading progress shows a percentage; other progress is ignored', () => {
  const model = new StatusModel();
  model.applyProgress('t1', { kind: 'begin', title: 'indexing something else', percentage: 10 });
  assert.equal(model.state, 'stopped');
  model.applyProgress('t1', { kind: 'report', percentage: 50 });
  assert.equal(model.percentage, undefined);

  model.applyProgress(7, { kind: 'begin', title: LOADING_PROGRESS_TITLE, percentage: 0 });
  assert.equal(model.state, 'loading');
  model.applyProgress(7, { kind: 'report', message: 'weights', percentage: 42.4 });
  assert.equal(model.view().text, '$(sync~spin) adaptrack 42%');
  assert.match(model.view().tooltip, /weights/);
  model.applyProgress(7, { kind: 'end' });
  assert.equal(model.percentage, undefined);
  model.applyNotification({ state: 'ready', message: '' });
  assert.equal(model.view().text, '$(check) adaptrack');
});
