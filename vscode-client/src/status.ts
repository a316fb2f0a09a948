/**
 * Server state as shown to the user.
 *
 * Owns: the state machine fed by `adaptrack/status` notifications, model-loading
 * `$/progress` reports and client lifecycle events, and its rendering into status bar
 * text/tooltip.  `StatusModel` has no `vscode` import (unit-tested under node);
 * `StatusBar` draws it.
 */
import type * as vscode from 'vscode';

export type ServerState = 'disabled' | 'installing' | 'starting' | 'loading' | 'indexing' | 'ready' | 'degraded' | 'error' | 'stopped';

/** Params of the server's `adaptrack/status` notification. */
export interface StatusNotification {
  /**
   * indexing: the API members a completion needs are being computed (the answer was
   * empty; ask again at "ready"); degraded: completions come but are not checked
   * against the installed APIs
   */
  state: 'loading' | 'indexing' | 'ready' | 'degraded' | 'error';
  message: string;
}

export const STATUS_NOTIFICATION = 'adaptrack/status';
export const LOADING_PROGRESS_TITLE = 'adaptrack: loading model';

export interface StatusView {
  text: string;
  tooltip: string;
  /** true when the item should use the error background */
  isError: boolean;
}

type Listener = (model: StatusModel) => void;

export class StatusModel {
  state: ServerState = 'stopped';
  message = '';
  /** loading progress, 0..100, when the server reports a percentage */
  percentage: number | undefined;
  private readonly listeners: Listener[] = [];
  private readonly loadingTokens = new Set<string>();

  onChange(listener: Listener): void {
    this.listeners.push(listener);
  }

  set(state: ServerState, message = ''): void {
    this.state = state;
    this.message = message;
    if (state !== 'loading') {
      this.percentage = undefined;
    }
    this.emit();
  }

  /**
   * Whether a change from `previous` to the current state means an answer that was
   * empty while the index computed can now be asked for again.
   */
  indexed(previous: ServerState): boolean {
    return previous === 'indexing' && this.state === 'ready';
  }

  /**
   * Apply an `adaptrack/status` notification; malformed params are an error state, not a
   * crash.  `askAgain()` runs when the notification ends an "indexing" wait (the answer
   * given meanwhile was empty).
   */
  applyNotification(params: unknown, askAgain?: () => void): void {
    const previous = this.state;
    const candidate = params as Partial<StatusNotification> | null;
    const state = candidate?.state;
    if (state !== 'loading' && state !== 'indexing' && state !== 'ready' && state !== 'degraded' && state !== 'error') {
      this.set('error', `malformed ${STATUS_NOTIFICATION} notification: ${JSON.stringify(params)}`);
      return;
    }
    this.set(state, typeof candidate?.message === 'string' ? candidate.message : '');
    if (askAgain && this.indexed(previous)) {
      askAgain();
    }
  }

  /**
   * Apply one `$/progress` value.  Only the model-loading progress (recognised by the
   * title of its `begin`) moves the status bar; other progress is ignored.
   */
  applyProgress(token: string | number, value: { kind: string; title?: string; message?: string; percentage?: number }): void {
    const key = String(token);
    if (value.kind === 'begin') {
      if (value.title !== LOADING_PROGRESS_TITLE) {
        return;
      }
      this.loadingTokens.add(key);
      this.state = 'loading';
    } else if (!this.loadingTokens.has(key)) {
      return;
    }
    if (value.kind === 'end') {
      this.loadingTokens.delete(key);
      this.percentage = undefined;
    } else {
      if (typeof value.percentage === 'number') {
        this.percentage = Math.max(0, Math.min(100, value.percentage));
      }
      if (typeof value.message === 'string') {
        this.message = value.message;
      }
    }
    this.emit();
  }

  view(): StatusView {
    const detail = this.message ? `: ${this.message}` : '';
    switch (this.state) {
      case 'loading': {
        const percent = this.percentage === undefined ? '' : ` ${Math.round(this.percentage)}%`;
        return { text: `$(sync~spin) adaptrack${percent}`, tooltip: `adaptrack: loading model${detail}`, isError: false };
      }
      case 'indexing':
        return { text: '$(sync~spin) adaptrack', tooltip: `adaptrack: reading the installed APIs${detail}`, isError: false };
      case 'ready':
        return { text: '$(check) adaptrack', tooltip: `adaptrack: ready${detail}`, isError: false };
      case 'degraded':
        return { text: '$(warning) adaptrack', tooltip: `adaptrack: completions not checked against the installed APIs${detail}`, isError: false };
      case 'error':
        return { text: '$(error) adaptrack', tooltip: `adaptrack: error${detail} (click for logs)`, isError: true };
      case 'installing':
        return { text: '$(sync~spin) adaptrack: installing', tooltip: `adaptrack: setting up the server's environment${detail}`, isError: false };
      case 'starting':
        return { text: '$(sync~spin) adaptrack', tooltip: `adaptrack: starting server${detail}`, isError: false };
      case 'disabled':
        return { text: '$(circle-slash) adaptrack', tooltip: 'adaptrack: disabled (run "adaptrack: Toggle Completions" to enable)', isError: false };
      case 'stopped':
      default:
        return { text: '$(debug-stop) adaptrack', tooltip: `adaptrack: server stopped${detail}`, isError: false };
    }
  }

  private emit(): void {
    for (const listener of this.listeners) {
      listener(this);
    }
  }
}

/** Draws a `StatusModel` into a status bar item; clicking it shows the logs. */
export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor(
    private readonly vscodeApi: typeof vscode,
    model: StatusModel,
    showLogsCommand: string,
  ) {
    this.item = vscodeApi.window.createStatusBarItem('adaptrack.status', vscodeApi.StatusBarAlignment.Right, 100);
    this.item.name = 'adaptrack';
    this.item.command = showLogsCommand;
    model.onChange((changed) => this.render(changed));
    this.render(model);
    this.item.show();
  }

  private render(model: StatusModel): void {
    const view = model.view();
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor = view.isError ? new this.vscodeApi.ThemeColor('statusBarItem.errorBackground') : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
