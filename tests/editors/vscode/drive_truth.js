// Drives code-server through what the user is told (issues 13 and 15), with one script:
//  1. a risky shell command asks in a quick pick; Enter right away denies it (and Escape the
//     next one); the status bar shows the run's tokens while the question waits;
//  2. an ask whose Agent view is closed while it runs (a sub-agent's `task`): reopened, the
//     view shows the whole stream and the sub-agent's calls nested, collapsed, under its card;
//  3. a run cancelled mid-stream reports the tokens it used.
// Input through the environment (see tests/editors/test_vscode.py); prints one JSON line.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const env = process.env;
const shots = env.SHOT_DIR;

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

async function ask(page, prompt) {
  await palette(page, 'Agent: Ask');
  const box = page.locator('.quick-input-widget input[placeholder="What should the agent do?"]');
  await box.waitFor({ state: 'visible' });
  await box.fill(prompt);
  await box.press('Enter');
}

const statusItem = (page) => page.locator('.statusbar-item', { hasText: 'default' }).first();

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
  const result = {};
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.setDefaultTimeout(30000);
    await page.goto(`${env.CS_URL}/?folder=${encodeURIComponent(env.WS_DIR)}`);
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    const chat = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');

    // -- 1. the confirmation: Deny is first and active, Enter denies ------------------------
    await ask(page, env.PROMPT_SHELL);
    const question = page.locator('.quick-input-widget', { hasText: 'Run this shell command?' });
    await question.waitFor({ state: 'visible', timeout: 60000 });
    await page.locator('.quick-input-list .monaco-list-row').first().waitFor();
    result.questionTitle = await page.locator('.quick-input-widget .quick-input-title').first().innerText().catch(() => '');
    result.questionPlaceholder = await page.locator('.quick-input-widget input').first().getAttribute('placeholder');
    // each row's own label (its detail line is a label-name of its own)
    result.choices = await page.locator('.quick-input-list .monaco-list-row').evaluateAll((rows) =>
      rows.map((r) => r.querySelector('.label-name').textContent));
    result.activeChoice = await page.locator('.quick-input-list .monaco-list-row.focused .label-name').first().innerText();
    // the run waits on the question: the status bar already counts the first model call
    result.statusWhileAsking = await statusItem(page).innerText();
    // the chat shows the run up to the question while the pick waits
    await chat.getByText(env.EXPECT_BEFORE_QUESTION).waitFor({ timeout: 15000 }).catch(() => undefined);
    result.chatWhileAsking = await chat.locator('#log').innerText().catch(() => '');
    await page.mouse.move(900, 650); // no hover tooltip over the question
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(shots, 'vscode-confirm.png') });
    await page.keyboard.press('Enter');
    // the next question, answered with Escape
    const second = page.locator(`.quick-input-widget input[placeholder=${JSON.stringify(env.SECOND_COMMAND)}]`);
    await second.waitFor({ state: 'visible', timeout: 60000 });
    result.secondQuestion = await second.getAttribute('placeholder');
    await page.keyboard.press('Escape');
    await chat.getByText(env.EXPECT_DENIED).waitFor({ timeout: 60000 });
    await chat.locator('.result').first().waitFor({ timeout: 30000 });
    result.chatAfterDeny = await chat.locator('#log').innerText();

    // -- 2. a sub-agent's task, with the Agent view closed while it runs -------------------
    await ask(page, env.PROMPT_TASK);
    await chat.getByText(env.PROMPT_TASK).waitFor(); // the run began (and showed the chat)
    await page.keyboard.press('Control+B'); // the user closes the side bar, and the chat in it
    await page.locator('.part.sidebar').waitFor({ state: 'hidden' });
    result.finalShownAtClose = (await chat.getByText(env.EXPECT_TASK_FINAL).count()) > 0;
    // the run ends out of sight: the status bar stops spinning and counts its tokens
    await page.waitForFunction(() => {
      const item = [...document.querySelectorAll('.statusbar-item')].find((e) => e.textContent.includes('default'));
      return item && !item.querySelector('[class*="spin"]');
    }, null, { timeout: 60000 });
    result.sidebarHiddenAtEnd = !(await page.locator('.part.sidebar').isVisible());
    await palette(page, 'Agent: Show Chat');
    await chat.getByText(env.EXPECT_TASK_FINAL).waitFor({ timeout: 30000 });
    const card = chat.locator('.tool', { has: chat.locator(':scope > .tool-head', { hasText: env.TASK_TITLE }) }).first();
    result.taskHead = await card.locator(':scope > .tool-head').innerText();
    const nested = card.locator(':scope > details.tool-children');
    result.nestedOpen = await nested.evaluate((d) => d.open);
    result.nestedSummary = await nested.locator('summary').innerText();
    result.nestedHeads = await nested.locator('.tool > .tool-head').evaluateAll((els) => els.map((e) => e.textContent));
    result.nestedBodies = await nested.locator('.tool > .tool-body').evaluateAll((els) => els.map((e) => e.textContent));
    result.taskBody = await card.locator(':scope > .tool-body').evaluate((e) => e.textContent);
    result.topLevelHeads = await chat.locator('.exchange > .tool > .tool-head').evaluateAll((els) => els.map((e) => e.textContent));
    await widenSidebar(page, 560);
    await nested.locator('summary').click();
    await card.scrollIntoViewIfNeeded();
    await page.waitForTimeout(200);
    await page.screenshot({ path: path.join(shots, 'vscode-task.png') });

    // -- 3. cancel mid-stream: the result counts the tokens used -----------------------------
    await ask(page, env.PROMPT_LONG);
    await chat.getByText(env.EXPECT_LONG_START).first().waitFor({ timeout: 60000 });
    await palette(page, 'Agent: Cancel');
    const cancelled = chat.locator('.result.cancelled').first();
    await cancelled.waitFor({ timeout: 30000 });
    result.cancelledLine = await cancelled.innerText();
    result.statusAfterCancel = await statusItem(page).innerText();
    result.ok = true;
  } catch (e) {
    result.error = String(e && e.stack || e);
    try {
      await ctx.pages()[0].screenshot({ path: path.join(shots, 'vscode-truth-failure.png') });
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
