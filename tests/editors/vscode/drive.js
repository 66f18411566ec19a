// Drives code-server (VS Code in the browser) in Debian's Chromium with playwright-core:
// palette "Agent: Ask" -> the refactor preview shows one checkbox per hunk -> tick one, Apply
// -> the editor shows that hunk only -> the chat view shows the streamed answer.
// Input through the environment (see tests/editors/test_vscode.py); prints one JSON line.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const env = process.env;
const url = env.CS_URL;
const ws = env.WS_DIR;
const shots = env.SHOT_DIR;
const t0 = Date.now();
const timings = {};
const mark = (name) => {
  timings[name] = (Date.now() - t0) / 1000;
};

async function palette(page, title) {
  // The extension activates asynchronously after the workbench appears: retry.
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: 5000 });
    await input.fill('>' + title);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
    try {
      await row.waitFor({ timeout: 1500 });
      await row.click();
      return;
    } catch {
      await page.keyboard.press('Escape');
      await page.waitForTimeout(500);
    }
  }
  throw new Error(`palette command not found: ${title}`);
}

// Drag the side bar's edge so the chat is wide enough to read in a screenshot.
async function widenSidebar(page, width) {
  const box = await page.locator('.part.sidebar').boundingBox();
  if (!box || box.width >= width) return;
  const x = box.x + box.width + 2;
  const y = box.y + box.height / 2;
  await page.mouse.move(x, y);
  await page.mouse.down();
  await page.mouse.move(box.x + width, y, { steps: 8 });
  await page.mouse.up();
  await page.waitForTimeout(300);
}

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-ls-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 760 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  const result = { timings };
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.setDefaultTimeout(30000);
    await page.goto(`${url}/?folder=${encodeURIComponent(ws)}`);
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    mark('workbench');

    // open the file (click the row: Enter can race the file search)
    await page.keyboard.press('Control+P');
    await page.locator('.quick-input-widget input').fill(env.FILE_NAME);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: env.FILE_NAME }).first().click();
    await page.waitForSelector(`.monaco-editor .view-lines:has-text(${JSON.stringify(env.EXPECT_BEFORE)})`);
    mark('editor');

    await palette(page, 'Agent: Ask');
    const box = page.locator('.quick-input-widget input[placeholder="What should the agent do?"]');
    await box.waitFor({ state: 'visible' });
    await box.fill(env.PROMPT);
    await box.press('Enter');
    mark('asked');

    // the refactor preview: one checkbox per hunk, unticked because each needs confirmation
    const apply = page.getByRole('button', { name: 'Apply', exact: true });
    await apply.waitFor({ timeout: 60000 });
    const rows = page.locator('.monaco-list-row[role="checkbox"][aria-label^="line "]');
    await rows.first().waitFor();
    result.previewRows = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('aria-label')));
    mark('preview');
    // the chat view (a webview: two nested iframes) streams while the edit waits for review
    const chat = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    await chat.getByText(env.EXPECT_MID).waitFor({ timeout: 30000 });
    // accept the first hunk only: tick its checkbox, leave the other unticked
    await page.locator(`.monaco-list-row[role="checkbox"][aria-label^=${JSON.stringify(env.ACCEPT_LABEL)}] .edit-checkbox`).click();
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(shots, 'vscode.png') });
    await apply.click();
    mark('applied');

    await page.waitForSelector(`.monaco-editor .view-lines:has-text(${JSON.stringify(env.EXPECT_AFTER)})`);
    mark('editor changed');

    // the chat shows the rest of the streamed answer and the run's result
    await chat.locator('.result').first().waitFor({ timeout: 60000 });
    await chat.getByText(env.EXPECT_FINAL).waitFor({ timeout: 10000 });
    mark('chat');
    result.chat = await chat.locator('#log').innerText();
    result.usage = await chat.locator('#usage').innerText();
    result.editor = await page.locator('.monaco-editor .view-lines').first().innerText();
    result.status = await page.locator('.statusbar-item', { hasText: 'default' }).first().innerText().catch(() => '');
    await page.screenshot({ path: path.join(shots, 'vscode-applied.png') });
    // the edit's card marks which hunk landed and which was rejected
    const edit = chat.locator('.tool.kind-edit').first();
    result.hunkMarks = await edit.locator('.hunk-mark').allInnerTexts();
    result.rejectedLines = await edit.locator('.diff pre div.rejected:not(.hunk-mark)').allInnerTexts();
    result.landedLines = await edit.locator('.diff pre div.landed:not(.hunk-mark)').allInnerTexts();
    await widenSidebar(page, 560);
    await edit.scrollIntoViewIfNeeded();
    await page.waitForTimeout(200);
    await page.screenshot({ path: path.join(shots, 'vscode-outcome.png') });

    // Agent: Set Mode… -> the status bar follows; Agent: Show Usage -> a notification
    await palette(page, 'Agent: Set Mode');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'acceptEdits' }).first().click();
    await page.locator('.statusbar-item', { hasText: 'acceptEdits' }).first().waitFor();
    result.statusAfterMode = await page.locator('.statusbar-item', { hasText: 'acceptEdits' }).first().innerText();
    await palette(page, 'Agent: Show Usage');
    const toast = page.locator('.notification-toast', { hasText: 'mode acceptEdits' }).first();
    await toast.waitFor();
    result.usageToast = await toast.innerText();
    mark('mode and usage');

    // Agent: MCP Servers -> a quick pick with each server's state, and a failed one's error
    await palette(page, 'Agent: MCP Servers');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'broken' }).first().waitFor();
    result.mcp = await page.locator('.quick-input-list').first().innerText();
    await page.keyboard.press('Escape');
    mark('mcp servers');
    result.ok = true;
  } catch (e) {
    result.error = String(e && e.stack || e);
    try {
      const page = ctx.pages()[0];
      await page.screenshot({ path: path.join(shots, 'vscode-failure.png') });
    } catch {
      // no page to show
    }
  } finally {
    await ctx.close().catch(() => undefined);
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write('\nRESULT ' + JSON.stringify(result) + '\n');
  process.exit(result.ok ? 0 : 1);
})();
