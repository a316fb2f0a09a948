// Extension-host tests (run by `npm run test:extension-host` inside a downloaded VS Code;
// the workspace is test-fixtures/, whose settings select the built-in model and the
// interpreter in $ADAPTRACK_PYTHON).
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import * as vscode from 'vscode';

import type { AdaptrackApi } from '../../extension';

const EXTENSION_ID = 'adaptrack.adaptrack';

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

suite('adaptrack extension', () => {
  let api: AdaptrackApi;

  suiteSetup(async () => {
    const extension = vscode.extensions.getExtension<AdaptrackApi>(EXTENSION_ID);
    assert.ok(extension, `${EXTENSION_ID} is not installed in the test host`);
    const folder = vscode.workspace.workspaceFolders![0].uri.fsPath;
    const document = await vscode.workspace.openTextDocument(path.join(folder, 'example.py'));
    await vscode.window.showTextDocument(document);
    api = await extension.activate();
  });

  test('contributes its commands', async () => {
    const commands = await vscode.commands.getCommands(true);
    for (const command of ['adaptrack.restart', 'adaptrack.showLogs', 'adaptrack.toggle']) {
      assert.ok(commands.includes(command), command);
    }
  });

  test('the server loads the built-in model and reports ready', async () => {
    await waitFor(() => api.status.state === 'ready' || api.status.state === 'error', 240000, 'the server state');
    assert.equal(api.status.state, 'ready', api.status.message);
  });

  test('inline completion after "np." through the running client', async () => {
    const client = api.server.languageClient;
    assert.ok(client, 'no language client');
    const document = vscode.window.activeTextEditor!.document;
    let line = document.lineCount - 1;
    while (line > 0 && !document.lineAt(line).text.endsWith('np.')) {
      line -= 1;
    }
    const position = { line, character: document.lineAt(line).text.length };
    type Answer = { items: { insertText: string | { value: string } }[] };
    // the first answers are empty while the API index computes numpy's members
    // ("indexing"); ask again until it is ready
    const deadline = Date.now() + 120000;
    let result: Answer;
    for (;;) {
      result = (await client.sendRequest('textDocument/inlineCompletion', {
        textDocument: { uri: document.uri.toString() },
        position,
        context: { triggerKind: 1 },
      })) as Answer;
      if (result.items.length > 0 || Date.now() > deadline) {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.ok(result.items.length > 0, 'no inline completion items');
    const text = typeof result.items[0].insertText === 'string' ? result.items[0].insertText : result.items[0].insertText.value;
    assert.match(text, /^[A-Za-z_]/, `completion after "np." should start with a name, got ${JSON.stringify(text)}`);
  });

  test('toggle stops and starts the server', async () => {
    await vscode.commands.executeCommand('adaptrack.toggle');
    await waitFor(() => api.status.state === 'disabled', 30000, 'disabled');
    await vscode.commands.executeCommand('adaptrack.toggle');
    await waitFor(() => api.status.state === 'ready', 240000, 'ready again');
  });

  test('restart brings the server back', async () => {
    await vscode.commands.executeCommand('adaptrack.restart');
    await waitFor(() => api.status.state === 'ready', 240000, 'ready after restart');
  });
});
