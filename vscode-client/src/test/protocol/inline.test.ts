// Protocol-level test: start the real server exactly as the extension does
// (buildServerLaunch + toInitializationOptions) and talk LSP to it over stdio with
// vscode-languageserver-protocol.  The interpreter comes from $ADAPTRACK_PYTHON (the
// pytest wrapper passes its own sys.executable).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  CompletionRequest,
  CompletionTriggerKind,
  createProtocolConnection,
  DidOpenTextDocumentNotification,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  InlineCompletionRequest,
  InlineCompletionTriggerKind,
  LogMessageNotification,
  NotificationType,
  ShowMessageNotification,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageserver-protocol/node';

import { buildServerLaunch } from '../../server';
import { ConfigurationLike, readSettings, toInitializationOptions } from '../../settings';
import { LOADING_PROGRESS_TITLE, STATUS_NOTIFICATION, StatusNotification } from '../../status';

const python = process.env.ADAPTRACK_PYTHON;
const READY_TIMEOUT_MS = Number(process.env.ADAPTRACK_READY_TIMEOUT_MS ?? 420000);

function config(values: Record<string, unknown>): ConfigurationLike {
  return { get: <T>(name: string) => values[name] as T | undefined };
}

function isNumpyAttribute(name: string): boolean {
  const output = execFileSync(python!, ['-c', 'import numpy, sys; print(hasattr(numpy, sys.argv[1]))', name], {
    encoding: 'utf8',
    timeout: 60000,
  });
  return output.trim() === 'True';
}

test(
  'the server started as the extension starts it answers an inline completion for a numpy file',
  { skip: python ? false : 'set ADAPTRACK_PYTHON to an interpreter with adaptrack-lsp installed', timeout: READY_TIMEOUT_MS + 120000 },
  async () => {
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'adaptrack-protocol-'));
    const file = path.join(workspace, 'example.py');
    const text = 'import numpy as np\n\nvalues = np.';
    fs.writeFileSync(file, text);

    // the same inputs the extension reads from the workspace configuration
    const settings = readSettings(
      config({
        model: 'tiny',
        device: 'cpu',
        temperature: 0,
        maxNewTokens: 8,
        numSamples: 2,
        timeoutMs: 300000,
        serverInterpreter: python,
        pythonPath: python,
      }),
    );
    const pathContext = { workspaceFolder: workspace };
    const launch = buildServerLaunch({
      serverInterpreter: settings.serverInterpreter,
      serverArgs: settings.serverArgs,
      pythonExtensionInterpreter: undefined,
      pathContext,
    });
    const initializationOptions = toInitializationOptions(settings, pathContext);

    const server = spawn(launch.command, launch.args, { cwd: launch.cwd, env: launch.env, stdio: 'pipe' });
    let stderr = '';
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
    const connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));

    const statuses: StatusNotification[] = [];
    const progressTitles: string[] = [];
    const warnings: string[] = [];
    let onStatus: () => void = () => undefined;
    connection.onRequest(WorkDoneProgressCreateRequest.type, () => undefined);
    connection.onNotification(new NotificationType<{ token: string | number; value?: { kind?: string; title?: string } }>('$/progress'), (params) => {
      if (params.value?.kind === 'begin' && params.value.title) {
        progressTitles.push(params.value.title);
      }
    });
    connection.onNotification(new NotificationType<StatusNotification>(STATUS_NOTIFICATION), (params) => {
      statuses.push(params);
      onStatus();
    });
    connection.onNotification(ShowMessageNotification.type, (params) => {
      warnings.push(params.message);
    });
    connection.onNotification(LogMessageNotification.type, () => undefined);
    connection.listen();

    try {
      const result = await connection.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        rootUri: pathToFileURL(workspace).toString(),
        workspaceFolders: [{ uri: pathToFileURL(workspace).toString(), name: 'workspace' }],
        capabilities: {
          window: { workDoneProgress: true },
          textDocument: {
            inlineCompletion: { dynamicRegistration: false },
            completion: { completionItem: { snippetSupport: false } },
          },
        },
        initializationOptions,
      });
      assert.ok(result.capabilities.inlineCompletionProvider, 'the server must offer inlineCompletionProvider');
      assert.ok(result.capabilities.completionProvider?.triggerCharacters?.includes('.'), 'completion must trigger on "."');

      const ready = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no ready status within ${READY_TIMEOUT_MS} ms: ${JSON.stringify(statuses)}\n${stderr.slice(-4000)}`)),
          READY_TIMEOUT_MS,
        );
        onStatus = () => {
          const last = statuses[statuses.length - 1];
          if (last.state === 'ready') {
            clearTimeout(timer);
            resolve();
          } else if (last.state === 'error') {
            clearTimeout(timer);
            reject(new Error(`server error: ${last.message}\n${stderr.slice(-4000)}`));
          }
        };
      });
      await connection.sendNotification(InitializedNotification.type, {});
      await ready;

      assert.deepEqual(warnings, [], 'the settings the extension sends must all be valid');
      assert.equal(statuses[0].state, 'loading', 'the first status is loading');
      assert.ok(progressTitles.includes(LOADING_PROGRESS_TITLE), `progress titles: ${JSON.stringify(progressTitles)}`);

      const uri = pathToFileURL(file).toString();
      await connection.sendNotification(DidOpenTextDocumentNotification.type, {
        textDocument: { uri, languageId: 'python', version: 1, text },
      });
      const position = { line: 2, character: 'values = np.'.length };
      // the first answers are empty while the API index computes the document's imports
      // (status "indexing"): ask again until it is ready
      const deadline = Date.now() + 120_000;
      let inline = await connection.sendRequest(InlineCompletionRequest.type, {
        textDocument: { uri },
        position,
        context: { triggerKind: InlineCompletionTriggerKind.Invoked },
      });
      let items = Array.isArray(inline) ? inline : (inline?.items ?? []);
      while (items.length === 0 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, 500));
        inline = await connection.sendRequest(InlineCompletionRequest.type, {
          textDocument: { uri },
          position,
          context: { triggerKind: InlineCompletionTriggerKind.Invoked },
        });
        items = Array.isArray(inline) ? inline : (inline?.items ?? []);
      }
      assert.ok(items.length > 0, `no inline completion items: ${JSON.stringify(inline)}`);
      const insertText = typeof items[0].insertText === 'string' ? items[0].insertText : items[0].insertText.value;
      const attribute = /^[A-Za-z_][A-Za-z0-9_]*/.exec(insertText)?.[0];
      assert.ok(attribute, `the completion after "np." must start with a name: ${JSON.stringify(insertText)}`);
      assert.ok(isNumpyAttribute(attribute), `np.${attribute} does not exist in the installed numpy`);

      // sampling may reach members not computed yet (e.g. np.linalg.*): the answer is then
      // empty with status "indexing", and the next request completes
      const askList = () =>
        connection.sendRequest(CompletionRequest.type, {
          textDocument: { uri },
          position,
          context: { triggerKind: CompletionTriggerKind.TriggerCharacter, triggerCharacter: '.' },
        });
      let list = await askList();
      let completionItems = Array.isArray(list) ? list : (list?.items ?? []);
      while (completionItems.length === 0 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, 500));
        list = await askList();
        completionItems = Array.isArray(list) ? list : (list?.items ?? []);
      }
      assert.ok(completionItems.length > 0, `no completion items after "np.": ${JSON.stringify(list)}`);

      await connection.sendRequest(ShutdownRequest.type);
      await connection.sendNotification(ExitNotification.type);
      const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), 20000))]);
      assert.equal(code, 0, `the server should exit with 0 after shutdown/exit, got ${code}`);
    } finally {
      connection.dispose();
      if (server.exitCode === null) {
        server.kill();
      }
      fs.rmSync(workspace, { recursive: true, force: true });
    }
  },
);
