// The agent-ls chat webview: renders the events the extension posts (see src/chat.ts).
// Plain browser JavaScript, no framework, no network.
(function () {
  'use strict';
  const vscode = acquireVsCodeApi();
  const log = document.getElementById('log');
  const usageEl = document.getElementById('usage');
  const form = document.getElementById('ask');
  const prompt = document.getElementById('prompt');
  const cancelBtn = document.getElementById('cancel');

  const ICONS = { pending: '○', in_progress: '◐', completed: '✓', failed: '✗' };
  let textBlock = null; // the agent message being streamed into
  let thoughtBlock = null;
  let exchange = null; // the current prompt's container
  let planEl = null;
  const calls = new Map();
  const usage = { mode: '', used: 0, size: 0, cost: 0 };

  // -- small markdown: fenced code, inline code, bold, italics, headings, lists, paragraphs ----

  function escapeHtml(s) {
    return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }

  function inline(s) {
    return escapeHtml(s)
      .replace(/`([^`]+)`/g, '<code>$1</code>')
      .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, '$1<em>$2</em>')
      .replace(/\[([^\]]+)\]\(([^)]+)\)/g, '<span class="link" title="$2">$1</span>');
  }

  function markdown(src) {
    const out = [];
    const lines = src.split('\n');
    let i = 0;
    let para = [];
    let list = null;
    const flushPara = () => {
      if (para.length) {
        out.push('<p>' + para.map(inline).join('<br>') + '</p>');
        para = [];
      }
    };
    const flushList = () => {
      if (list) {
        out.push('<' + list.tag + '>' + list.items.map((x) => '<li>' + inline(x) + '</li>').join('') + '</' + list.tag + '>');
        list = null;
      }
    };
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^```(\w*)/);
      if (fence) {
        flushPara();
        flushList();
        const body = [];
        i++;
        while (i < lines.length && !lines[i].startsWith('```')) {
          body.push(lines[i]);
          i++;
        }
        i++;
        out.push('<pre class="code"><code>' + escapeHtml(body.join('\n')) + '</code></pre>');
        continue;
      }
      const heading = line.match(/^(#{1,4})\s+(.*)$/);
      const bullet = line.match(/^\s*[-*]\s+(.*)$/);
      const numbered = line.match(/^\s*\d+[.)]\s+(.*)$/);
      if (heading) {
        flushPara();
        flushList();
        out.push('<h' + (heading[1].length + 2) + '>' + inline(heading[2]) + '</h' + (heading[1].length + 2) + '>');
      } else if (bullet || numbered) {
        flushPara();
        const tag = bullet ? 'ul' : 'ol';
        if (!list || list.tag !== tag) {
          flushList();
          list = { tag, items: [] };
        }
        list.items.push((bullet || numbered)[1]);
      } else if (line.trim() === '') {
        flushPara();
        flushList();
      } else {
        flushList();
        para.push(line);
      }
      i++;
    }
    flushPara();
    flushList();
    return out.join('');
  }

  // -- line diff (LCS) with a little context -------------------------------------------------

  function diffLines(oldText, newText) {
    const a = oldText === null || oldText === undefined ? [] : oldText.replace(/\n$/, '').split('\n');
    const b = newText.replace(/\n$/, '').split('\n');
    let pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    let suf = 0;
    while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
    const A = a.slice(pre, a.length - suf);
    const B = b.slice(pre, b.length - suf);
    let ops = [];
    if (A.length * B.length <= 4000000) {
      const dp = Array.from({ length: A.length + 1 }, () => new Uint32Array(B.length + 1));
      for (let x = A.length - 1; x >= 0; x--) {
        for (let y = B.length - 1; y >= 0; y--) {
          dp[x][y] = A[x] === B[y] ? dp[x + 1][y + 1] + 1 : Math.max(dp[x + 1][y], dp[x][y + 1]);
        }
      }
      let x = 0;
      let y = 0;
      while (x < A.length || y < B.length) {
        if (x < A.length && y < B.length && A[x] === B[y]) {
          ops.push([' ', A[x]]);
          x++;
          y++;
        } else if (x < A.length && (y >= B.length || dp[x + 1][y] >= dp[x][y + 1])) {
          ops.push(['-', A[x]]);
          x++;
        } else {
          ops.push(['+', B[y]]);
          y++;
        }
      }
    } else {
      ops = A.map((l) => ['-', l]).concat(B.map((l) => ['+', l]));
    }
    const all = a.slice(0, pre).map((l) => [' ', l]).concat(ops, a.slice(a.length - suf).map((l) => [' ', l]));
    // keep 2 lines of context around changes
    const keep = new Array(all.length).fill(false);
    all.forEach((op, k) => {
      if (op[0] !== ' ') {
        for (let d = -2; d <= 2; d++) if (k + d >= 0 && k + d < all.length) keep[k + d] = true;
      }
    });
    const shown = [];
    let skipped = false;
    all.forEach((op, k) => {
      if (keep[k]) {
        shown.push(op);
        skipped = false;
      } else if (!skipped) {
        shown.push(['…', '']);
        skipped = true;
      }
    });
    return shown;
  }

  // Which of an edit's hunks landed, from its rawOutput: {status: partial, landed, hunks} or
  // applied / rejected (all or none). null: not decided yet (or not an edit's outcome).
  function hunkOutcome(raw) {
    if (!raw || typeof raw !== 'object') return null;
    if (raw.status === 'partial' && Array.isArray(raw.landed)) {
      return { total: raw.hunks, landed: (k) => raw.landed.includes(k) };
    }
    if (raw.status === 'applied' || raw.status === 'unconfirmed') return { total: null, landed: () => true };
    if (raw.status === 'rejected') return { total: null, landed: () => false };
    return null;
  }

  function renderDiff(item, outcome) {
    const wrap = document.createElement('div');
    wrap.className = 'diff';
    const head = document.createElement('div');
    head.className = 'diff-path';
    head.textContent = (item.oldText === null || item.oldText === undefined ? 'new file ' : '') + item.path;
    wrap.appendChild(head);
    const pre = document.createElement('pre');
    const ops = diffLines(item.oldText, item.newText || '');
    // A hunk of the review is a run of changed lines between unchanged ones, as the server
    // splits them; mark each only when the runs are exactly the hunks it proposed.
    const runs = [];
    ops.forEach(([op], k) => {
      if (op === '+' || op === '-') {
        if (k === 0 || (ops[k - 1][0] !== '+' && ops[k - 1][0] !== '-')) runs.push(k);
      }
    });
    const marked = outcome && (outcome.total === null || outcome.total === runs.length);
    let hunk = -1;
    let landed = true;
    ops.forEach(([op, text], k) => {
      if (marked && runs.includes(k)) {
        hunk = runs.indexOf(k);
        landed = outcome.landed(hunk);
        const mark = document.createElement('div');
        mark.className = 'hunk-mark ' + (landed ? 'landed' : 'rejected');
        mark.textContent = (landed ? '✓ hunk ' : '✗ hunk ') + (hunk + 1) + (landed ? ' applied' : ' rejected');
        pre.appendChild(mark);
      }
      const line = document.createElement('div');
      line.className = op === '+' ? 'add' : op === '-' ? 'del' : op === '…' ? 'gap' : 'ctx';
      if (marked && (op === '+' || op === '-')) line.classList.add(landed ? 'landed' : 'rejected');
      line.textContent = op === '…' ? '…' : op + ' ' + text;
      pre.appendChild(line);
    });
    wrap.appendChild(pre);
    if (outcome && !marked && outcome.total) {
      const note = document.createElement('div');
      note.className = 'hunk-mark';
      note.textContent = 'hunks ' + outcome.total + ' proposed; see the header for those applied';
      wrap.appendChild(note);
    }
    return wrap;
  }

  // -- rendering events ----------------------------------------------------------------------

  function scroll() {
    window.scrollTo(0, document.body.scrollHeight);
  }

  function container() {
    if (!exchange) {
      exchange = document.createElement('section');
      exchange.className = 'exchange';
      log.appendChild(exchange);
    }
    return exchange;
  }

  function add(cls, html) {
    const el = document.createElement('div');
    el.className = cls;
    if (html !== undefined) el.innerHTML = html;
    container().appendChild(el);
    return el;
  }

  function onPrompt(ev) {
    exchange = null;
    textBlock = thoughtBlock = planEl = null;
    const el = add('msg user');
    if (ev.context) {
      const ctx = document.createElement('div');
      ctx.className = 'context';
      ctx.textContent = ev.context;
      el.appendChild(ctx);
    }
    const body = document.createElement('div');
    body.innerHTML = markdown(ev.text);
    el.appendChild(body);
  }

  function toolContent(call) {
    const box = call.el.querySelector(':scope > .tool-body');
    box.textContent = '';
    for (const item of call.content || []) {
      if (item.type === 'diff') {
        box.appendChild(renderDiff(item, call.kind === 'edit' ? hunkOutcome(call.raw) : null));
      } else if (item.type === 'content' && item.content && item.content.type === 'text') {
        const pre = document.createElement('pre');
        pre.className = 'output';
        const lines = item.content.text.replace(/\n$/, '').split('\n');
        pre.textContent = (lines.length > 40 ? '… ' + (lines.length - 40) + ' more lines\n' : '') + lines.slice(-40).join('\n');
        box.appendChild(pre);
      }
    }
    if (call.status === 'failed' && call.raw !== undefined && call.raw !== null) {
      const why = document.createElement('div');
      why.className = 'failure';
      why.textContent = typeof call.raw === 'string' ? call.raw.split('\n')[0] : JSON.stringify(call.raw);
      box.appendChild(why);
    }
  }

  // What happened to a proposed edit, from the tool's rawOutput {status, landed}.
  function editOutcome(call) {
    const raw = call.raw;
    if (call.kind !== 'edit' || !raw || typeof raw !== 'object' || !raw.status) return '';
    if (raw.status === 'partial' && Array.isArray(raw.landed)) {
      const n = raw.landed.length;
      return ' · partly applied (hunk' + (n === 1 ? ' ' : 's ') + raw.landed.map((i) => i + 1).join(', ') + ')';
    }
    return ' · ' + String(raw.status);
  }

  function toolHeader(call) {
    const head = call.el.querySelector(':scope > .tool-head');
    // a task card: its status, then what its sub-agent cost so far
    const cost = call.children && call.cost ? ' · $' + call.cost.toFixed(4) : '';
    head.textContent = (ICONS[call.status] || '•') + ' ' + (call.title || 'tool') + ' · ' + call.status.replace('_', ' ') + editOutcome(call) + cost;
    call.el.className = 'tool ' + call.status + (call.kind ? ' kind-' + call.kind : '');
  }

  // The `task` call a sub-agent's update belongs to (`_meta.agentLs.parentToolCallId`).
  function parentCall(u) {
    const meta = u && u._meta && u._meta.agentLs;
    return meta && meta.parentToolCallId ? calls.get(meta.parentToolCallId) : undefined;
  }

  // A task card holds its sub-agent's calls in a collapsed list with a one-line summary.
  function childList(parent) {
    if (!parent.children) {
      const box = document.createElement('details');
      box.className = 'tool-children';
      box.innerHTML = '<summary></summary>';
      parent.el.insertBefore(box, parent.el.querySelector(':scope > .tool-body'));
      parent.children = { box, calls: [] };
    }
    return parent.children;
  }

  function childSummary(parent) {
    const list = parent.children;
    if (!list) return;
    const n = list.calls.length;
    const failed = list.calls.filter((c) => c.status === 'failed').length;
    const running = list.calls.filter((c) => c.status === 'pending' || c.status === 'in_progress').length;
    let text = n + ' tool call' + (n === 1 ? '' : 's');
    if (running) text += ' · ' + running + ' running';
    if (failed) text += ' · ' + failed + ' failed';
    if (parent.cost) text += ' · $' + parent.cost.toFixed(4);
    list.box.querySelector('summary').textContent = text;
    toolHeader(parent);
  }

  function onToolCall(u) {
    textBlock = thoughtBlock = null;
    const parent = parentCall(u);
    const el = document.createElement('div');
    el.className = 'tool';
    el.innerHTML = '<div class="tool-head"></div><div class="tool-body"></div>';
    if (parent) {
      childList(parent).box.appendChild(el);
    } else {
      container().appendChild(el);
    }
    const call = { el, title: u.title, kind: u.kind, status: u.status || 'pending', content: u.content, parent };
    calls.set(u.toolCallId, call);
    if (parent) parent.children.calls.push(call);
    toolHeader(call);
    toolContent(call);
    if (parent) childSummary(parent);
  }

  function onToolCallUpdate(u) {
    let call = calls.get(u.toolCallId);
    if (!call) {
      onToolCall({ toolCallId: u.toolCallId, title: u.title || u.toolCallId, status: u.status || 'pending', _meta: u._meta });
      call = calls.get(u.toolCallId);
    }
    if (u.title) call.title = u.title;
    if (u.status) call.status = u.status;
    if (Array.isArray(u.content)) call.content = u.content; // ACP: content replaces
    if (u.rawOutput !== undefined) call.raw = u.rawOutput;
    toolHeader(call);
    toolContent(call);
    if (call.parent) childSummary(call.parent);
  }

  function onPlan(u) {
    if (!planEl) planEl = add('plan');
    const items = (u.entries || []).map((e) => {
      const box = e.status === 'completed' ? '☑' : e.status === 'in_progress' ? '◐' : '☐';
      return '<li class="' + escapeHtml(e.status || '') + '">' + box + ' ' + inline(e.content || '') + '</li>';
    });
    planEl.innerHTML = '<div class="plan-title">Plan</div><ul>' + items.join('') + '</ul>';
  }

  function showUsage() {
    const parts = [];
    if (usage.mode) parts.push('mode ' + usage.mode);
    if (usage.size) parts.push('context ' + Math.round((100 * usage.used) / usage.size) + '% of ' + usage.size.toLocaleString());
    if (usage.cost) parts.push('$' + usage.cost.toFixed(4));
    usageEl.textContent = parts.join(' · ');
  }

  function onUpdate(ev) {
    const u = ev.update || {};
    switch (u.sessionUpdate) {
      case 'agent_message_chunk': {
        if (!u.content || u.content.type !== 'text') break;
        thoughtBlock = null;
        if (!textBlock) {
          textBlock = add('msg agent');
          textBlock.dataset.text = '';
        }
        textBlock.dataset.text += u.content.text;
        textBlock.innerHTML = markdown(textBlock.dataset.text);
        break;
      }
      case 'agent_thought_chunk': {
        if (!u.content || u.content.type !== 'text') break;
        textBlock = null;
        if (!thoughtBlock) {
          thoughtBlock = add('thought');
          thoughtBlock.dataset.text = '';
        }
        thoughtBlock.dataset.text += u.content.text;
        thoughtBlock.textContent = thoughtBlock.dataset.text;
        break;
      }
      case 'tool_call':
        onToolCall(u);
        break;
      case 'tool_call_update':
        onToolCallUpdate(u);
        break;
      case 'plan':
        onPlan(u);
        break;
      case 'usage_update': {
        const cost = (u.cost && u.cost.amount) || 0;
        const task = parentCall(u);
        if (task) {
          // A sub-agent's call: what the session spent since is the task's share.
          task.cost = (task.cost || 0) + Math.max(0, cost - (usage.cost || 0));
          childSummary(task);
        } else {
          usage.used = u.used || 0;
          usage.size = u.size || 0;
        }
        usage.cost = cost;
        showUsage();
        break;
      }
      case 'current_mode_update':
        usage.mode = u.currentModeId;
        showUsage();
        add('note', 'Mode: ' + escapeHtml(u.currentModeId || ''));
        break;
    }
  }

  function onResult(ev) {
    textBlock = thoughtBlock = null;
    if (ev.error) {
      add('result error', escapeHtml(ev.error));
      return;
    }
    const r = ev.result || {};
    const u = r.usage || {};
    const tokens = (u.inputTokens || 0) + (u.outputTokens || 0);
    let line = (r.stopReason || '?') + ' · ' + tokens.toLocaleString() + ' tokens';
    if (r.costUsd) line += ' · $' + Number(r.costUsd).toFixed(4);
    const el = add('result ' + (r.stopReason === 'end_turn' ? 'ok' : escapeHtml(r.stopReason || '')), escapeHtml(line));
    if (r.error) {
      const why = document.createElement('div');
      why.textContent = r.error;
      el.appendChild(why);
    }
  }

  function handle(ev) {
    switch (ev.type) {
      case 'prompt':
        onPrompt(ev);
        break;
      case 'update':
        onUpdate(ev);
        break;
      case 'result':
        onResult(ev);
        break;
      case 'note':
        textBlock = null;
        add('note', escapeHtml(ev.text));
        break;
      case 'running':
        cancelBtn.disabled = !ev.running;
        document.body.classList.toggle('running', !!ev.running);
        break;
      case 'clear':
        log.textContent = '';
        exchange = textBlock = thoughtBlock = planEl = null;
        calls.clear();
        break;
      case 'replay':
        log.textContent = '';
        exchange = textBlock = thoughtBlock = planEl = null;
        calls.clear();
        for (const e of ev.events) handle(e);
        break;
    }
    scroll();
  }

  window.addEventListener('message', (e) => handle(e.data));

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = prompt.value.trim();
    if (!text) return;
    vscode.postMessage({ type: 'ask', text });
    prompt.value = '';
  });
  prompt.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  cancelBtn.addEventListener('click', () => vscode.postMessage({ type: 'cancel' }));
  vscode.postMessage({ type: 'ready' });
})();
