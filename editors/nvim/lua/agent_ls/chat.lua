-- The chat buffer: a markdown scratch buffer in a split that renders `agent/update`.
local util = require('agent_ls.util')

local M = {}

local ns = vim.api.nvim_create_namespace('agent_ls_chat')

local ICONS = { pending = '○', in_progress = '◐', completed = '✓', failed = '✗' }

--- What the chat shows and what the status line reads.
M.state = {
  buf = nil, ---@type integer?
  calls = {}, ---@type table<string, {title: string, kind: string?, status: string, mark: integer}>
  block = nil, ---@type 'text'|'thought'|'output'|nil  what the last line continues
  usage = nil, ---@type {used: integer, size: integer, cost: table?}?
  mode = nil, ---@type string?
  running = 0,
  progress = nil, ---@type string?
  session = nil, ---@type string?
}
local S = M.state

M.config = {
  position = 'right',
  width = 72,
  height = 16,
  auto_open = true,
  follow = true,
  max_output_lines = 20,
}

local function valid(buf)
  return buf and vim.api.nvim_buf_is_valid(buf)
end

--- The chat buffer, created on first use.
function M.buf()
  if valid(S.buf) then
    return S.buf
  end
  local buf = vim.api.nvim_create_buf(false, true)
  pcall(vim.api.nvim_buf_set_name, buf, 'agent-ls://chat')
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = 'markdown'
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '# agent-ls' })
  vim.bo[buf].modifiable = false
  vim.keymap.set('n', 'q', function()
    M.close()
  end, { buffer = buf, desc = 'agent-ls: close the chat' })
  vim.keymap.set('n', 'i', function()
    vim.cmd('AgentAsk')
  end, { buffer = buf, desc = 'agent-ls: ask' })
  S.buf = buf
  S.calls = {}
  S.block = nil
  return buf
end

--- Windows (in any tab) that show the chat.
function M.wins()
  local wins = {}
  if not valid(S.buf) then
    return wins
  end
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == S.buf then
      wins[#wins + 1] = win
    end
  end
  return wins
end

--- Show the chat in a split. `focus` moves the cursor into it.
function M.open(focus)
  local buf = M.buf()
  local win = M.wins()[1]
  if not win then
    local prev = vim.api.nvim_get_current_win()
    local cfg = M.config
    if cfg.position == 'bottom' then
      vim.cmd(('botright %dsplit'):format(cfg.height))
    elseif cfg.position == 'left' then
      vim.cmd(('topleft %dvsplit'):format(cfg.width))
    else
      vim.cmd(('botright %dvsplit'):format(cfg.width))
    end
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
    vim.wo[win].wrap = true
    vim.wo[win].linebreak = true
    vim.wo[win].number = false
    vim.wo[win].relativenumber = false
    vim.wo[win].signcolumn = 'no'
    vim.wo[win].winfixwidth = cfg.position ~= 'bottom'
    vim.wo[win].winbar = "%{%v:lua.require'agent_ls'.statusline()%}"
    if not focus and vim.api.nvim_win_is_valid(prev) then
      vim.api.nvim_set_current_win(prev)
    end
  elseif focus then
    vim.api.nvim_set_current_win(win)
  end
  M.scroll()
  return win
end

function M.close()
  for _, win in ipairs(M.wins()) do
    if #vim.api.nvim_list_wins() > 1 then
      pcall(vim.api.nvim_win_close, win, false)
    end
  end
end

function M.toggle()
  if #M.wins() > 0 then
    M.close()
  else
    M.open(true)
  end
end

--- Keep the chat windows at the newest line (not the one the cursor is in).
function M.scroll()
  if not M.config.follow then
    return
  end
  local cur = vim.api.nvim_get_current_win()
  local last = vim.api.nvim_buf_line_count(S.buf)
  for _, win in ipairs(M.wins()) do
    if win ~= cur then
      pcall(vim.api.nvim_win_set_cursor, win, { last, 0 })
    end
  end
end

local function edit(fn)
  local buf = M.buf()
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn, buf)
  vim.bo[buf].modifiable = false
  if not ok then
    error(err)
  end
  M.scroll()
end

--- Append whole lines at the end.
local function append_lines(lines)
  edit(function(buf)
    vim.api.nvim_buf_set_lines(buf, -1, -1, false, lines)
  end)
end

--- Continue the last line with `text` (which may hold newlines), prefixing new lines.
local function append_text(text, prefix)
  prefix = prefix or ''
  edit(function(buf)
    local count = vim.api.nvim_buf_line_count(buf)
    local last = vim.api.nvim_buf_get_lines(buf, count - 1, count, false)[1] or ''
    local parts = util.lines(text)
    parts[1] = last .. parts[1]
    for i = 2, #parts do
      parts[i] = prefix .. parts[i]
    end
    vim.api.nvim_buf_set_lines(buf, count - 1, count, false, parts)
  end)
end

--- Start a paragraph of streamed text unless the last line already continues one.
local function start_text()
  if S.block == 'text' then
    return
  end
  local buf = M.buf()
  local count = vim.api.nvim_buf_line_count(buf)
  local last = vim.api.nvim_buf_get_lines(buf, count - 1, count, false)[1] or ''
  if last ~= '' then
    append_lines({ '', '' })
  end
  S.block = 'text'
end

local function content_text(content)
  if type(content) ~= 'table' then
    return nil
  end
  if content.type == 'text' then
    return content.text
  end
  return nil
end

--- For a partly applied edit: the label of each `@@` header of the unified diff, saying which
--- of its hunks landed. The server's hunks are the diff's changes split on unchanged lines;
--- when the two counts differ (two changes on one line), nothing is marked rather than guessed.
local function hunk_marks(old, new, diff, differ, raw)
  if type(raw) ~= 'table' or raw.status ~= 'partial' or type(raw.hunks) ~= 'number'
      or type(raw.landed) ~= 'table' then
    return nil
  end
  local ok, changes = pcall(differ, old, new, { result_type = 'indices', ctxlen = 0 })
  if not ok or type(changes) ~= 'table' or #changes ~= raw.hunks then
    return nil
  end
  local landed = {}
  for _, i in ipairs(raw.landed) do
    landed[i + 1] = true
  end
  local marks, next_change = {}, 1
  for _, l in ipairs(util.lines(diff)) do
    local s, c = l:match('^@@ %-(%d+),?(%d*) ')
    if s then
      local last = tonumber(s) + math.max(tonumber(c ~= '' and c or '1'), 1) - 1
      local parts = {}
      while changes[next_change] do
        local ch = changes[next_change]
        local at = ch[2] > 0 and ch[1] or ch[1] + 1 -- a pure insertion sits after line ch[1]
        if at > last + 1 then
          break
        end
        parts[#parts + 1] = ('hunk %d %s'):format(next_change, landed[next_change] and 'applied' or 'rejected')
        next_change = next_change + 1
      end
      marks[#marks + 1] = #parts > 0 and (' · ' .. table.concat(parts, ', ')) or ''
    end
  end
  return marks
end

local function diff_lines(item, raw)
  local old = item.oldText
  if old == vim.NIL then
    old = nil
  end
  local new = item.newText or ''
  local lines = { '```diff', '--- ' .. (old and util.short(item.path) or '/dev/null'), '+++ ' .. util.short(item.path) }
  local differ = (vim.text and vim.text.diff) or vim.diff
  -- one final newline each: texts that end in one already would diff an empty last line
  local function ended(t)
    return t:sub(-1) == '\n' and t or t .. '\n'
  end
  local ok, diff = pcall(differ, ended(old or ''), ended(new), { result_type = 'unified', ctxlen = 1 })
  if ok and type(diff) == 'string' then
    local marks = hunk_marks(ended(old or ''), ended(new), diff, differ, raw) or {}
    local header = 0
    for _, l in ipairs(util.lines(diff)) do
      if l:match('^@@') then
        header = header + 1
        l = l .. (marks[header] or '')
      end
      if l ~= '' then
        lines[#lines + 1] = l
      end
    end
  end
  lines[#lines + 1] = '```'
  return lines
end

--- What happened to a proposed edit, from the tool's rawOutput {status, landed}.
local function edit_outcome(call)
  local raw = call.raw
  if call.kind ~= 'edit' or type(raw) ~= 'table' or type(raw.status) ~= 'string' then
    return ''
  end
  if raw.status == 'partial' and type(raw.landed) == 'table' then
    local hunks = {}
    for _, i in ipairs(raw.landed) do
      hunks[#hunks + 1] = tostring(i + 1)
    end
    local of = type(raw.hunks) == 'number' and (' of %d'):format(raw.hunks) or ''
    return (' · partly applied (hunk%s %s%s)'):format(#hunks == 1 and '' or 's',
      table.concat(hunks, ', '), of)
  end
  return ' · ' .. raw.status
end

--- The `task` call a sub-agent's update belongs to (`_meta.agentLs.parentToolCallId`).
local function parent_call(u)
  local meta = type(u._meta) == 'table' and u._meta.agentLs or nil
  return type(meta) == 'table' and meta.parentToolCallId or nil
end

local function call_line(call)
  local icon = ICONS[call.status] or '•'
  local status = (call.status or '?'):gsub('_', ' ')
  return ('%s%s %s · %s%s'):format(call.indent or '', icon, call.title or 'tool', status, edit_outcome(call))
end

--- The lines under a tool call's header: its content (diffs, output) and a failure reason.
local function call_body(call)
  local lines = {}
  for _, item in ipairs(call.content or {}) do
    if item.type == 'diff' then
      vim.list_extend(lines, diff_lines(item, call.raw))
    elseif item.type == 'content' then
      local text = content_text(item.content)
      if text and text ~= '' then
        local out = util.lines((text:gsub('\n$', '')))
        local max = M.config.max_output_lines or 20
        if #out > max then
          local skipped = #out - max
          out = vim.list_slice(out, skipped + 1)
          table.insert(out, 1, ('… %d more lines'):format(skipped))
        end
        for _, l in ipairs(out) do
          lines[#lines + 1] = '    ' .. l
        end
      end
    end
  end
  if call.status == 'failed' and call.raw ~= nil and call.raw ~= vim.NIL then
    local raw = type(call.raw) == 'string' and call.raw or vim.json.encode(call.raw)
    lines[#lines + 1] = '    ' .. (util.lines(raw)[1] or ''):sub(1, 200)
  end
  if call.indent then -- a sub-agent's call sits under its task
    for i, l in ipairs(lines) do
      lines[i] = call.indent .. l
    end
  end
  return lines
end

--- Redraw a region (a header line and the lines below it that it owns) in place. Regions
--- are tracked by an extmark on the header line, so appends and earlier regions growing or
--- shrinking never lose them.
local function render_region(region, header, body)
  edit(function(buf)
    local pos = vim.api.nvim_buf_get_extmark_by_id(buf, ns, region.mark, {})
    local row = pos and pos[1]
    if not row then
      return
    end
    local old = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
    vim.api.nvim_buf_set_text(buf, row, 0, row, #old, { header })
    vim.api.nvim_buf_set_lines(buf, row + 1, row + 1 + (region.n or 0), false, body)
    region.n = #body
  end)
end

--- A new region at the end of the chat.
local function new_region(header)
  S.block = nil
  append_lines({ '', header })
  local buf = M.buf()
  local row = vim.api.nvim_buf_line_count(buf) - 1
  local region = { n = 0 }
  region.mark = vim.api.nvim_buf_set_extmark(buf, ns, row, 0, { right_gravity = false })
  S.block = 'region'
  return region
end

--- A call's lines under its header. A `task` shows its sub-agent's calls first, indented,
--- then what the sub-agent wrote: its calls are not regions of their own at the end of the
--- chat, where the sub-agent's text would read before the calls that came first.
local function call_lines(call)
  local lines = {}
  for _, child in ipairs(call.children or {}) do
    lines[#lines + 1] = call_line(child)
    vim.list_extend(lines, call_body(child))
  end
  return vim.list_extend(lines, call_body(call))
end

local function render_call(call)
  render_region(call, call_line(call), call_lines(call))
end

local function on_tool_call(u)
  local call = { title = u.title, kind = u.kind, status = u.status or 'pending', content = u.content }
  local parent_id = parent_call(u)
  if parent_id then
    call.indent = '    '
  end
  local parent = parent_id and S.calls[parent_id]
  if parent then
    call.parent = parent
    parent.children = parent.children or {}
    parent.children[#parent.children + 1] = call
    S.calls[u.toolCallId or ('call' .. tostring(#parent.children))] = call
    render_call(parent)
    return
  end
  local region = new_region(call_line(call))
  call.mark, call.n = region.mark, 0
  S.calls[u.toolCallId or ('call' .. call.mark)] = call
  if call.content then
    render_call(call)
  end
end

local function on_tool_call_update(u)
  local call = S.calls[u.toolCallId]
  if not call then
    on_tool_call({ toolCallId = u.toolCallId, title = u.title or u.toolCallId, status = u.status, _meta = u._meta })
    call = S.calls[u.toolCallId]
  end
  if u.title then
    call.title = u.title
  end
  if u.status then
    call.status = u.status
  end
  if type(u.content) == 'table' then
    call.content = u.content -- as in ACP, an update's content replaces the call's content
  end
  if u.rawOutput ~= nil then
    call.raw = u.rawOutput
  end
  render_call(call.parent or call)
end

local function on_plan(u)
  local body = {}
  for _, e in ipairs(u.entries or {}) do
    local box = e.status == 'completed' and '[x]' or (e.status == 'in_progress' and '[~]' or '[ ]')
    body[#body + 1] = ('- %s %s'):format(box, e.content or '')
  end
  if not S.plan then
    S.plan = new_region('**Plan**')
  end
  render_region(S.plan, '**Plan**', body)
end

--- Render one `agent/update` notification.
function M.on_update(params)
  if type(params) ~= 'table' or type(params.update) ~= 'table' then
    return
  end
  local u = params.update
  S.session = params.sessionId or S.session
  if M.config.auto_open and #M.wins() == 0 and u.sessionUpdate ~= 'usage_update'
      and u.sessionUpdate ~= 'current_mode_update' then
    M.open(false)
  end
  local kind = u.sessionUpdate
  if kind == 'agent_message_chunk' then
    local text = content_text(u.content)
    if text and S.block ~= 'text' then
      -- a turn's text after a tool call starts with the newlines that part it from the last
      -- turn's; the new paragraph parts it already (else: runs of empty lines)
      text = text:gsub('^\n+', '')
    end
    if text and text ~= '' then
      start_text()
      append_text(text)
    end
  elseif kind == 'agent_thought_chunk' then
    local text = content_text(u.content)
    if text then
      if S.block ~= 'thought' then
        S.block = nil
        append_lines({ '', '> ' })
        S.block = 'thought'
      end
      append_text(text, '> ')
    end
  elseif kind == 'tool_call' then
    on_tool_call(u)
  elseif kind == 'tool_call_update' then
    on_tool_call_update(u)
  elseif kind == 'plan' then
    on_plan(u)
  elseif kind == 'usage_update' then
    if parent_call(u) and S.usage then -- a sub-agent's context is not the session's
      S.usage.cost = u.cost
    else
      S.usage = { used = u.used, size = u.size, cost = u.cost }
    end
  elseif kind == 'current_mode_update' then
    S.mode = u.currentModeId
  end
  vim.cmd('redrawstatus!')
end

--- A new exchange: the user's prompt, then the agent's answer below.
function M.user_prompt(prompt, context)
  S.block = nil
  S.plan = nil
  local lines = { '', '## You', '' }
  if context then
    lines[#lines + 1] = '_' .. context .. '_'
    lines[#lines + 1] = ''
  end
  vim.list_extend(lines, util.lines(prompt))
  vim.list_extend(lines, { '', '## Agent', '' })
  append_lines(lines)
  S.block = 'text'
end

--- The end of a run: its stop reason, tokens and cost.
function M.on_result(result, err)
  S.block = nil
  if err then
    append_lines({ '', ('_error: %s_'):format(err.message or vim.inspect(err)) })
    return
  end
  if type(result) ~= 'table' then
    return
  end
  local usage = result.usage or {}
  local tokens = (usage.inputTokens or 0) + (usage.outputTokens or 0)
  local line = ('_%s · %d tokens'):format(result.stopReason or '?', tokens)
  if result.costUsd and result.costUsd > 0 then
    line = line .. (' · $%.4f'):format(result.costUsd)
  end
  line = line .. '_'
  local lines = { '', line }
  if result.stopReason == 'error' and result.error then
    lines[#lines + 1] = '_error: ' .. tostring(result.error) .. '_'
  end
  append_lines(lines)
end

--- A line of information (not from the agent), e.g. a review decision.
function M.note(text)
  S.block = nil
  append_lines({ '', '_' .. text .. '_' })
end

--- The chat's lines (for tests and scripts).
function M.lines()
  return vim.api.nvim_buf_get_lines(M.buf(), 0, -1, false)
end

function M.text()
  return table.concat(M.lines(), '\n')
end

return M
