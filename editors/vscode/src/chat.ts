// The chat view: a webview that renders `agent/update` (streamed text, tool calls with their
// status and diffs, plan, usage) and sends prompts typed into it.
import * as vscode from 'vscode';

/** What the extension posts to the webview. */
export type ChatEvent =
  | { type: 'prompt'; text: string; context?: string }
  | { type: 'update'; sessionId?: string; update: Record<string, unknown> }
  | { type: 'result'; result?: Record<string, unknown>; error?: string }
  | { type: 'note'; text: string }
  | { type: 'running'; running: boolean }
  | { type: 'clear' };

export class ChatViewProvider implements vscode.WebviewViewProvider {
  public static readonly viewId = 'agentLs.chat';
  private view?: vscode.WebviewView;
  /** Everything posted so far, replayed when the view is (re)created. */
  private readonly events: ChatEvent[] = [];
  private readonly maxEvents = 20000;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onAsk: (text: string) => void,
    private readonly onCancel: () => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    view.webview.onDidReceiveMessage((msg: { type: string; text?: string }) => {
      if (msg.type === 'ask' && msg.text) {
        this.onAsk(msg.text);
      } else if (msg.type === 'cancel') {
        this.onCancel();
      } else if (msg.type === 'ready') {
        void view.webview.postMessage({ type: 'replay', events: this.events });
      }
    });
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
      }
    });
  }

  post(event: ChatEvent): void {
    if (event.type === 'clear') {
      this.events.length = 0;
    } else {
      this.events.push(event);
      if (this.events.length > this.maxEvents) {
        this.events.splice(0, this.events.length - this.maxEvents);
      }
    }
    void this.view?.webview.postMessage(event);
  }

  /** Show the view (without taking focus from the editor). */
  async reveal(): Promise<void> {
    if (this.view) {
      this.view.show(true);
      return;
    }
    await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = Array.from({ length: 24 }, () => Math.floor(Math.random() * 36).toString(36)).join('');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css'));
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link href="${style}" rel="stylesheet">
<title>Agent</title>
</head>
<body>
<div id="log" role="log" aria-live="polite"></div>
<div id="footer">
  <div id="usage"></div>
  <form id="ask">
    <textarea id="prompt" rows="3" placeholder="Ask the agent about the active file… (Enter to send, Shift+Enter for a new line)"></textarea>
    <div class="buttons">
      <button type="submit" id="send">Send</button>
      <button type="button" id="cancel" disabled>Cancel</button>
    </div>
  </form>
</div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}
