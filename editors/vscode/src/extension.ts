// agent-ls for VS Code: a language client of `agent-ls serve`, the palette commands, a chat
// view, a status bar item, and the two requests the server asks editors (saveDocuments,
// getDiagnostics). Edits arrive as workspace/applyEdit with one change annotation per hunk
// that needs confirmation, so VS Code shows them in its refactor preview by itself.
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  MessageActionItem,
  MessageType,
  ServerOptions,
  ShowMessageRequest,
  ShowMessageRequestParams,
  State,
  TransportKind,
} from 'vscode-languageclient/node';
import { ChatViewProvider } from './chat';
import { findServer, SECRET_KEYS, serverEnv, serverSettings } from './server';

const MODES: { id: string; detail: string }[] = [
  { id: 'default', detail: 'Review edits; confirm commands that are not known to be safe' },
  { id: 'acceptEdits', detail: 'Apply edits without review; still confirm risky commands' },
  { id: 'plan', detail: 'Read and plan only: no edits, no commands that change anything' },
  { id: 'bypassPermissions', detail: 'Ask nothing (sensitive paths still ask)' },
];

interface RunResult {
  sessionId: string;
  stopReason: string;
  text: string;
  usage?: { inputTokens?: number; outputTokens?: number; cachedReadTokens?: number; cachedWriteTokens?: number };
  costUsd?: number;
  error?: string;
}

interface AgentUpdate {
  sessionId?: string;
  update: Record<string, unknown> & { sessionUpdate?: string };
}

/** The answers that refuse: the safe default of a question. */
const REFUSALS = ['Deny', 'Reject'];

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function shortNumber(n: number): string {
  return n >= 10000 ? `${(n / 1000).toFixed(0)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export /** `agent.status`'s `sandbox`: how shell commands run. */
type SandboxStatus = { mode?: string; active?: boolean; backend?: string | null; reason?: string };

class Agent implements vscode.Disposable {
  client?: LanguageClient;
  private starting?: Promise<LanguageClient | undefined>;
  readonly output = vscode.window.createOutputChannel('agent-ls', { log: true });
  readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  readonly chat: ChatViewProvider;
  private running = 0;
  private mode = 'default';
  // the shell sandbox as agent.status reports it (undefined until the server answered)
  private sandbox: SandboxStatus | undefined;
  private tokens = 0; // of the runs that ended
  // the tokens so far of each session's run in flight (usage_update's _meta.agentLs.usage)
  private readonly runTokens = new Map<string, number>();
  private cost = 0;
  private context = { used: 0, size: 0 };
  private sessionId?: string;
  private progress?: string;

  constructor(private readonly ctx: vscode.ExtensionContext) {
    this.chat = new ChatViewProvider(
      ctx.extensionUri,
      (text) => void this.ask(text),
      () => void this.cancel(),
    );
    this.mode = vscode.workspace.getConfiguration('agentLs').get<string>('mode') ?? 'default';
    this.statusItem.command = 'agentLs.showChat';
    this.renderStatus();
    this.statusItem.show();
  }

  dispose(): void {
    void this.client?.stop();
    this.output.dispose();
    this.statusItem.dispose();
  }

  // -- the client --------------------------------------------------------------------------

  async ready(): Promise<LanguageClient | undefined> {
    if (this.client && this.client.state === State.Running) {
      return this.client;
    }
    if (!this.starting) {
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async start(): Promise<LanguageClient | undefined> {
    const server = findServer();
    if (!server) {
      this.statusItem.text = '$(warning) agent-ls';
      this.statusItem.tooltip = 'agent-ls server not found';
      const pick = await vscode.window.showErrorMessage(
        'agent-ls: cannot find the server. Install it from a clone (pip install . in it) into the workspace .venv or your PATH, or set agentLs.serverPath.',
        'Open Settings',
      );
      if (pick) {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'agentLs.server');
      }
      return undefined;
    }
    this.output.appendLine(`starting ${server.command} ${server.args.join(' ')} (from ${server.source})`);
    const env = await serverEnv(this.ctx.secrets);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command: server.command,
      args: server.args,
      transport: TransportKind.stdio,
      options: { env, cwd },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      initializationOptions: serverSettings(),
      outputChannel: this.output,
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) {
              return answer;
            }
            return params.items.map((item, i) => (item.section === 'agent' ? serverSettings() : answer[i]));
          },
        },
        // The server's "Fix with agent" code action runs through the chat and status bar.
        executeCommand: async (command, args, next) => {
          if (command === 'agent.fix' || command === 'agent.ask') {
            const arg = (args?.[0] ?? {}) as Record<string, unknown>;
            const diags = (arg.diagnostics as { message?: string }[] | undefined) ?? [];
            const shown = command === 'agent.fix'
              ? diags.length === 1 ? `Fix with agent: ${diags[0].message ?? ''}` : `Fix ${diags.length} problems with agent`
              : String(arg.prompt ?? '');
            return this.run(command, arg, shown, this.describeUri(arg.uri as string | undefined));
          }
          return next(command, args);
        },
      },
    };
    const client = new LanguageClient('agentLs', 'agent-ls', serverOptions, clientOptions);
    client.onNotification('agent/update', (params: AgentUpdate) => this.onUpdate(params));
    client.onRequest('agent/getDiagnostics', (params: { uri?: string } | null) => this.getDiagnostics(client, params));
    client.onRequest('agent/saveDocuments', (params: { uris?: string[] } | null) => this.saveDocuments(client, params));
    client.onNotification('$/progress', (p: { value?: { kind?: string; message?: string; title?: string } }) => {
      // languageclient shows the progress (with its Cancel button); keep the step for the status bar
      const v = p?.value;
      this.progress = v?.kind === 'end' ? undefined : v?.message ?? v?.title ?? this.progress;
      this.renderStatus();
    });
    try {
      await client.start();
    } catch (e) {
      void vscode.window.showErrorMessage(`agent-ls: the server did not start: ${errorText(e)}`);
      this.output.show(true);
      return undefined;
    }
    // Confirmations as modal dialogs that show the whole message (the command to run).
    client.onRequest(ShowMessageRequest.type, (params, token) => this.confirm(params, token));
    this.client = client;
    this.renderStatus();
    void this.refreshSandbox(client);
    return client;
  }

  async restart(): Promise<void> {
    const old = this.client;
    this.client = undefined;
    if (old) {
      await old.stop().catch(() => undefined);
    }
    await this.ready();
  }

  settingsChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration('agentLs')) {
      return;
    }
    if (['agentLs.serverPath', 'agentLs.serverCommand', 'agentLs.env'].some((k) => e.affectsConfiguration(k))) {
      void this.restart();
      return;
    }
    if (e.affectsConfiguration('agentLs.mode')) {
      this.mode = vscode.workspace.getConfiguration('agentLs').get<string>('mode') ?? this.mode;
      this.renderStatus();
    }
    void this.client?.sendNotification('workspace/didChangeConfiguration', { settings: { agent: serverSettings() } });
  }

  // -- what the server asks -----------------------------------------------------------------

  // A question with a refusing answer (Deny, Reject) is a quick pick, not a modal dialog: VS
  // Code's modal makes its first button primary and focused (Enter or Space would run the risky
  // command) and its close affordance a button of its own, so no modal can have Deny both the
  // default and the Escape answer without an extra Cancel. See editors/README.md.
  private async confirm(params: ShowMessageRequestParams, token?: vscode.CancellationToken): Promise<MessageActionItem | null> {
    const actions = params.actions ?? [];
    const show = params.type === MessageType.Error
      ? vscode.window.showErrorMessage
      : params.type === MessageType.Warning
        ? vscode.window.showWarningMessage
        : vscode.window.showInformationMessage;
    if (actions.length === 0) {
      void show(params.message);
      return null;
    }
    const refusal = actions.find((a) => REFUSALS.includes(a.title));
    if (!refusal) {
      const [first, ...rest] = params.message.split('\n');
      const choice = await show(first, { modal: true, detail: rest.join('\n').trim() || undefined }, ...actions);
      return choice ?? null; // dismissed: the server treats it as a refusal
    }
    return this.pickAnswer(params.message, actions, refusal, token);
  }

  /** The question as a quick pick: the refusal first and active, so Enter and Escape refuse. */
  private pickAnswer(
    message: string,
    actions: MessageActionItem[],
    refusal: MessageActionItem,
    token?: vscode.CancellationToken,
  ): Promise<MessageActionItem> {
    const lines = message.split('\n').map((l) => l.trim()).filter(Boolean);
    const [question, subject, ...notes] = lines;
    const grantNote = notes.find((l) => l.startsWith('"Allow for this session"'));
    const whyNote = notes.filter((l) => l !== grantNote).join(' ');
    type Item = vscode.QuickPickItem & { action: MessageActionItem };
    const items: Item[] = [refusal, ...actions.filter((a) => a !== refusal)].map((action) => ({
      label: action.title,
      action,
      description: action === refusal ? '(Enter, Escape)' : undefined,
      detail: action === refusal ? whyNote || undefined : action.title === 'Allow for this session' ? grantNote : undefined,
    }));
    // the whole question stays readable in the chat while the pick is open
    this.chat.post({ type: 'note', text: `Asked: ${lines.join(' ')}` });
    return new Promise((resolve) => {
      const pick = vscode.window.createQuickPick<Item>();
      pick.title = `agent-ls: ${question ?? 'Confirm'}`;
      pick.placeholder = subject ?? question;
      pick.items = items;
      pick.activeItems = [items[0]];
      pick.ignoreFocusOut = true;
      pick.matchOnDetail = false;
      let answered: MessageActionItem = refusal;
      let withdrawn = false;
      const done = (action: MessageActionItem) => {
        answered = action;
        pick.hide();
      };
      const subscriptions = [
        pick.onDidAccept(() => done(pick.activeItems[0]?.action ?? refusal)),
        pick.onDidHide(() => {
          subscriptions.forEach((d) => d.dispose());
          pick.dispose();
          this.chat.post({ type: 'note', text: withdrawn ? 'The question was withdrawn.' : `Answered: ${answered.title}` });
          resolve(answered);
        }),
        token?.onCancellationRequested(() => {
          withdrawn = true; // the server stopped waiting (cancel, timeout): nothing is answered
          done(refusal);
        }) ?? { dispose() {} },
      ];
      pick.show();
    });
  }

  private async getDiagnostics(client: LanguageClient, params: { uri?: string } | null) {
    const c2p = client.code2ProtocolConverter;
    const items: { uri: string; diagnostics: unknown[] }[] = [];
    if (params?.uri) {
      const uri = client.protocol2CodeConverter.asUri(params.uri);
      items.push({ uri: params.uri, diagnostics: await c2p.asDiagnostics(vscode.languages.getDiagnostics(uri)) });
    } else {
      for (const [uri, diags] of vscode.languages.getDiagnostics()) {
        if (diags.length > 0) {
          items.push({ uri: c2p.asUri(uri), diagnostics: await c2p.asDiagnostics(diags) });
        }
      }
    }
    return { items };
  }

  private async saveDocuments(client: LanguageClient, params: { uris?: string[] } | null) {
    const saved: string[] = [];
    for (const raw of params?.uris ?? []) {
      const uri = client.protocol2CodeConverter.asUri(raw);
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
      if (!doc || !doc.isDirty || (await doc.save())) {
        saved.push(raw);
      }
    }
    return { saved };
  }

  private onUpdate(params: AgentUpdate): void {
    const u = params?.update ?? {};
    if (params?.sessionId) {
      this.sessionId = params.sessionId;
    }
    if (u.sessionUpdate === 'usage_update') {
      const cost = u.cost as { amount?: number } | undefined;
      this.cost = cost?.amount ?? this.cost;
      const meta = u._meta as { agentLs?: { parentToolCallId?: string; usage?: RunResult['usage'] } } | undefined;
      if (!meta?.agentLs?.parentToolCallId) { // a sub-agent's context is not the session's
        this.context = { used: Number(u.used ?? 0), size: Number(u.size ?? 0) };
      }
      const run = meta?.agentLs?.usage;
      if (run && params.sessionId) {
        this.runTokens.set(params.sessionId, (run.inputTokens ?? 0) + (run.outputTokens ?? 0));
      }
      this.renderStatus();
    } else if (u.sessionUpdate === 'current_mode_update') {
      this.mode = String(u.currentModeId ?? this.mode);
      this.renderStatus();
    }
    // show paths of diffs relative to the workspace
    if (u.sessionUpdate === 'tool_call_update' && Array.isArray(u.content)) {
      u.content = (u.content as Record<string, unknown>[]).map((c) =>
        c.type === 'diff' && typeof c.path === 'string'
          ? { ...c, path: vscode.workspace.asRelativePath(vscode.Uri.file(c.path)) }
          : c);
    }
    this.chat.post({ type: 'update', sessionId: params?.sessionId, update: u });
  }

  // -- runs -----------------------------------------------------------------------------------

  private describeUri(uri: string | undefined): string | undefined {
    if (!uri) {
      return undefined;
    }
    try {
      return vscode.workspace.asRelativePath(vscode.Uri.parse(uri));
    } catch {
      return uri;
    }
  }

  private setRunning(delta: number): void {
    this.running = Math.max(0, this.running + delta);
    void vscode.commands.executeCommand('setContext', 'agentLs.running', this.running > 0);
    this.chat.post({ type: 'running', running: this.running > 0 });
    if (this.running === 0) {
      this.progress = undefined;
      // a run that ended without a result (an error) still used what it reported
      this.tokens = this.shownTokens();
      this.runTokens.clear();
    }
    this.renderStatus();
  }

  async run(command: string, arg: Record<string, unknown>, shown: string, context?: string): Promise<RunResult | undefined> {
    const client = await this.ready();
    if (!client) {
      return undefined;
    }
    this.chat.post({ type: 'prompt', text: shown, context });
    void this.chat.reveal();
    this.setRunning(+1);
    try {
      const result = (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] })) as RunResult;
      this.chat.post({ type: 'result', result: result as unknown as Record<string, unknown> });
      if (result) {
        this.sessionId = result.sessionId ?? this.sessionId;
        this.runTokens.delete(result.sessionId);
        this.tokens += (result.usage?.inputTokens ?? 0) + (result.usage?.outputTokens ?? 0);
        if (result.stopReason === 'error') {
          void vscode.window.showErrorMessage(`agent-ls: ${result.error ?? 'the run failed'}`);
        }
      }
      return result;
    } catch (e) {
      this.chat.post({ type: 'result', error: errorText(e) });
      void vscode.window.showErrorMessage(`agent-ls: ${errorText(e)}`);
      return undefined;
    } finally {
      this.setRunning(-1);
    }
  }

  private async command<T>(command: string, arg: Record<string, unknown> = {}): Promise<T | undefined> {
    const client = await this.ready();
    if (!client) {
      return undefined;
    }
    try {
      return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] })) as T;
    } catch (e) {
      void vscode.window.showErrorMessage(`agent-ls: ${command}: ${errorText(e)}`);
      return undefined;
    }
  }

  // -- palette commands -------------------------------------------------------------------------

  async ask(text?: string): Promise<RunResult | undefined> {
    const editor = vscode.window.activeTextEditor;
    const doc = editor?.document;
    const where = doc && !doc.isUntitled ? vscode.workspace.asRelativePath(doc.uri) : undefined;
    const prompt = text ?? (await vscode.window.showInputBox({
      title: 'Agent: Ask',
      prompt: where ? `About ${where}${editor && !editor.selection.isEmpty ? ' (the selection is sent)' : ''}` : undefined,
      placeHolder: 'What should the agent do?',
      ignoreFocusOut: true,
    }));
    if (!prompt || !prompt.trim()) {
      return undefined;
    }
    const client = await this.ready();
    if (!client) {
      return undefined;
    }
    const arg: Record<string, unknown> = { prompt };
    let context = where;
    if (editor && doc && doc.uri.scheme === 'file') {
      arg.uri = client.code2ProtocolConverter.asUri(doc.uri);
      if (!editor.selection.isEmpty) {
        arg.range = client.code2ProtocolConverter.asRange(editor.selection);
        context = `${where}, lines ${editor.selection.start.line + 1}-${editor.selection.end.line + 1}`;
      }
    }
    return this.run('agent.ask', arg, prompt, context);
  }

  async fix(): Promise<RunResult | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage('agent-ls: open a file with problems to fix.');
      return undefined;
    }
    const doc = editor.document;
    const sel = editor.selection;
    const line = sel.active.line;
    const diags = vscode.languages.getDiagnostics(doc.uri).filter((d) =>
      sel.isEmpty ? d.range.start.line <= line && line <= d.range.end.line : d.range.intersection(sel) !== undefined);
    if (diags.length === 0) {
      void vscode.window.showInformationMessage('agent-ls: no problems at the cursor.');
      return undefined;
    }
    const client = await this.ready();
    if (!client) {
      return undefined;
    }
    const range = sel.isEmpty ? doc.lineAt(line).range : sel;
    const arg = {
      uri: client.code2ProtocolConverter.asUri(doc.uri),
      range: client.code2ProtocolConverter.asRange(range),
      diagnostics: await client.code2ProtocolConverter.asDiagnostics(diags),
    };
    const shown = diags.length === 1 ? `Fix with agent: ${diags[0].message}` : `Fix ${diags.length} problems with agent`;
    return this.run('agent.fix', arg, shown, vscode.workspace.asRelativePath(doc.uri));
  }

  async cancel(): Promise<void> {
    const r = await this.command<{ cancelled: boolean }>('agent.cancel');
    if (r && !r.cancelled) {
      void vscode.window.showInformationMessage('agent-ls: nothing is running.');
    }
  }

  async newSession(): Promise<void> {
    const r = await this.command<{ sessionId: string }>('agent.newSession');
    if (r) {
      this.sessionId = r.sessionId;
      this.cost = 0;
      this.context = { used: 0, size: 0 };
      this.chat.post({ type: 'note', text: `New session ${r.sessionId}` });
      this.renderStatus();
    }
  }

  async resume(): Promise<void> {
    const r = await this.command<{ sessions: { sessionId: string; title?: string; turns?: number; current?: boolean; costUsd?: number; updated?: string }[] }>('agent.sessions');
    if (!r) {
      return;
    }
    if (r.sessions.length === 0) {
      void vscode.window.showInformationMessage('agent-ls: there are no sessions yet.');
      return;
    }
    const pick = await vscode.window.showQuickPick(
      r.sessions.map((s) => ({
        label: `${s.current ? '$(check) ' : ''}${s.title || s.sessionId}`,
        description: `${s.turns ?? 0} turns${s.costUsd ? ` · $${s.costUsd.toFixed(4)}` : ''}`,
        detail: `${s.sessionId}${s.updated ? ` · ${s.updated}` : ''}`,
        id: s.sessionId,
      })),
      { title: 'Agent: Resume Session', placeHolder: 'Pick a session' },
    );
    if (!pick) {
      return;
    }
    const res = await this.command<{ sessionId: string; title?: string }>('agent.resume', { sessionId: pick.id });
    if (res) {
      this.sessionId = res.sessionId;
      this.chat.post({ type: 'note', text: `Resumed ${res.title || res.sessionId}` });
      this.renderStatus();
    }
  }

  async setMode(mode?: string): Promise<void> {
    const chosen = mode ?? (await vscode.window.showQuickPick(
      MODES.map((m) => ({ label: m.id, detail: m.detail, picked: m.id === this.mode })),
      { title: 'Agent: Set Mode', placeHolder: `Current: ${this.mode}` },
    ))?.label;
    if (!chosen) {
      return;
    }
    const r = await this.command<{ mode: string }>('agent.setMode', { mode: chosen });
    if (r) {
      this.mode = r.mode;
      this.renderStatus();
    }
  }

  async showUsage(): Promise<void> {
    const s = await this.command<{
      model: string; mode: string; sessionId?: string; running: string[]; costUsd?: number; grants?: string[];
      usage?: { inputTokens: number; outputTokens: number; cachedReadTokens: number; cachedWriteTokens: number } | null;
    }>('agent.status');
    if (!s) {
      return;
    }
    this.mode = s.mode;
    this.renderStatus();
    const u = s.usage ?? { inputTokens: 0, outputTokens: 0, cachedReadTokens: 0, cachedWriteTokens: 0 };
    const text = `Model ${s.model} · mode ${s.mode} · session ${s.sessionId ?? '(none yet)'}${s.running.length ? ' · running' : ''}`;
    const detail = [
      `Tokens: ${u.inputTokens} in, ${u.outputTokens} out, ${u.cachedReadTokens} cache read, ${u.cachedWriteTokens} cache write`,
      `Cost: $${(s.costUsd ?? 0).toFixed(4)}`,
      s.grants?.length ? `Allowed for this session: ${s.grants.join(', ')}` : '',
    ].filter(Boolean).join('\n');
    this.chat.post({ type: 'note', text: `${text} · ${detail.replace(/\n/g, ' · ')}` });
    void vscode.window.showInformationMessage(`agent-ls: ${text}`, { detail, modal: false });
  }

  async mcpServers(): Promise<void> {
    type Server = { name: string; source: string; state: string; tools: string[]; error?: string };
    const r = await this.command<{ servers: Server[]; problems?: string[] }>('agent.mcp');
    if (!r) {
      return;
    }
    const items: vscode.QuickPickItem[] = r.servers.map((s) => ({
      label: `${s.state === 'failed' ? '$(error)' : s.state === 'ready' ? '$(check)' : '$(circle-outline)'} ${s.name}`,
      description: `${s.state} · ${s.source}${s.tools.length ? ` · ${s.tools.length} tools` : ''}`,
      detail: s.error ?? (s.tools.join(', ') || undefined),
    }));
    for (const problem of r.problems ?? []) {
      items.push({ label: '$(warning) config problem', detail: problem });
    }
    if (!items.length) {
      void vscode.window.showInformationMessage('agent-ls: no MCP servers configured.');
      return;
    }
    await vscode.window.showQuickPick(items, { title: 'Agent: MCP Servers', matchOnDetail: true });
  }

  async clearGrants(): Promise<void> {
    const r = await this.command<{ cleared: number }>('agent.clearGrants');
    if (r) {
      void vscode.window.showInformationMessage(`agent-ls: forgot ${r.cleared} session permission(s).`);
    }
  }

  async remember(): Promise<void> {
    const text = await vscode.window.showInputBox({
      prompt: "A note for the project's memory (the agent reads it from the next ask)",
      placeHolder: 'e.g. run the tests with make check',
    });
    if (!text?.trim()) {
      return;
    }
    const r = await this.command<{ path: string; line: string }>('agent.remember', { text });
    if (r) {
      void vscode.window.showInformationMessage(`agent-ls: remembered "${text.trim()}"`, { detail: r.path, modal: false });
    }
  }

  async undo(): Promise<void> {
    const r = await this.command<{ reverted: string[]; skipped: { path: string; reason: string }[] }>('agent.undo');
    if (!r) {
      return;
    }
    const lines = [
      ...r.reverted.map((p) => `reverted ${vscode.workspace.asRelativePath(p)}`),
      ...r.skipped.map((s) => `left ${vscode.workspace.asRelativePath(s.path)}: ${s.reason}`),
    ];
    this.chat.post({ type: 'note', text: lines.length ? `Undo: ${lines.join(' · ')}` : 'Undo: nothing to undo' });
    void vscode.window.showInformationMessage(
      lines.length ? `agent-ls: undo — ${r.reverted.length} file(s) reverted, ${r.skipped.length} left` : 'agent-ls: nothing to undo',
      { detail: lines.join('\n'), modal: false },
    );
  }

  async setApiKey(): Promise<void> {
    const provider = await vscode.window.showQuickPick(
      [
        { label: 'Anthropic', env: 'ANTHROPIC_API_KEY' },
        { label: 'OpenAI', env: 'OPENAI_API_KEY' },
      ],
      { title: 'Agent: Set API Key', placeHolder: 'Which provider?' },
    );
    if (!provider) {
      return;
    }
    const key = await vscode.window.showInputBox({
      title: `${provider.label} API key`,
      prompt: `Stored in VS Code's secret storage and given to the server as ${provider.env} (your environment wins when it has one). Leave empty to remove it.`,
      password: true,
      ignoreFocusOut: true,
    });
    if (key === undefined) {
      return;
    }
    const secret = SECRET_KEYS[provider.env];
    if (key.trim()) {
      await this.ctx.secrets.store(secret, key.trim());
    } else {
      await this.ctx.secrets.delete(secret);
    }
    await this.restart();
    void vscode.window.showInformationMessage(`agent-ls: ${provider.label} API key ${key.trim() ? 'saved' : 'removed'}; the server was restarted.`);
  }

  // -- status bar -----------------------------------------------------------------------------

  private async refreshSandbox(client: LanguageClient): Promise<void> {
    try {
      const status = (await client.sendRequest('workspace/executeCommand', {
        command: 'agent.status',
        arguments: [{}],
      })) as { sandbox?: SandboxStatus } | null;
      this.sandbox = status?.sandbox ?? undefined;
      this.renderStatus();
    } catch {
      // an old server without agent.status' sandbox: no indicator
    }
  }

  /** The window's tokens: the runs that ended and those still going. */
  private shownTokens(): number {
    let total = this.tokens;
    for (const n of this.runTokens.values()) {
      total += n;
    }
    return total;
  }

  renderStatus(): void {
    const parts = [`$(hubot) ${this.mode}`];
    if (this.sandbox) {
      parts.push(this.sandbox.active ? '$(lock) sandbox' : '$(unlock) no sandbox');
    }
    if (this.running > 0) {
      parts.push('$(sync~spin)');
    }
    const tokens = this.shownTokens();
    if (tokens > 0) {
      parts.push(`${shortNumber(tokens)} tok`);
    }
    if (this.cost > 0) {
      parts.push(`$${this.cost.toFixed(4)}`);
    }
    this.statusItem.text = parts.join(' ');
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**agent-ls** — mode \`${this.mode}\`${this.running ? ', running' : ', idle'}\n\n`);
    if (this.progress) {
      md.appendText(`${this.progress}\n\n`);
    }
    if (this.sessionId) {
      md.appendMarkdown(`Session \`${this.sessionId}\`\n\n`);
    }
    md.appendMarkdown(`Tokens this window: ${tokens.toLocaleString()} · cost $${this.cost.toFixed(4)}`);
    if (this.context.size) {
      md.appendMarkdown(` · context ${Math.round((100 * this.context.used) / this.context.size)}%`);
    }
    if (this.sandbox) {
      md.appendMarkdown(
        this.sandbox.active
          ? `\n\nShell commands run in the ${this.sandbox.backend ?? 'sandbox'} sandbox (\`${this.sandbox.mode}\`).`
          : `\n\nShell commands run unsandboxed (\`${this.sandbox.mode}\`)${this.sandbox.reason ? `: ${this.sandbox.reason}` : ''}.`,
      );
    }
    md.appendMarkdown('\n\nClick to show the chat.');
    this.statusItem.tooltip = md;
  }
}

let agent: Agent | undefined;

export async function activate(ctx: vscode.ExtensionContext): Promise<Agent> {
  agent = new Agent(ctx);
  const a = agent;
  ctx.subscriptions.push(
    a,
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, a.chat, {
      webviewOptions: { retainContextWhenHidden: true },
    }),
    vscode.commands.registerCommand('agentLs.ask', (text?: string) => a.ask(typeof text === 'string' ? text : undefined)),
    vscode.commands.registerCommand('agentLs.fix', () => a.fix()),
    vscode.commands.registerCommand('agentLs.cancel', () => a.cancel()),
    vscode.commands.registerCommand('agentLs.newSession', () => a.newSession()),
    vscode.commands.registerCommand('agentLs.resume', () => a.resume()),
    vscode.commands.registerCommand('agentLs.setMode', (mode?: string) => a.setMode(typeof mode === 'string' ? mode : undefined)),
    vscode.commands.registerCommand('agentLs.showUsage', () => a.showUsage()),
    vscode.commands.registerCommand('agentLs.setApiKey', () => a.setApiKey()),
    vscode.commands.registerCommand('agentLs.showChat', () => a.chat.reveal()),
    vscode.commands.registerCommand('agentLs.clearGrants', () => a.clearGrants()),
    vscode.commands.registerCommand('agentLs.remember', () => a.remember()),
    vscode.commands.registerCommand('agentLs.undo', () => a.undo()),
    vscode.commands.registerCommand('agentLs.mcpServers', () => a.mcpServers()),
    vscode.commands.registerCommand('agentLs.restart', () => a.restart()),
    vscode.workspace.onDidChangeConfiguration((e) => a.settingsChanged(e)),
  );
  void vscode.commands.executeCommand('setContext', 'agentLs.running', false);
  // Start the server now, so that code actions and diagnostics work before the first ask.
  if (vscode.workspace.workspaceFolders?.length) {
    void a.ready();
  }
  return a;
}

export async function deactivate(): Promise<void> {
  await agent?.client?.stop();
  agent = undefined;
}
