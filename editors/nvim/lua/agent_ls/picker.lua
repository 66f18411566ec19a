-- The confirmation picker. Neovim's built-in vim.ui.select is inputlist(), which holds the event
-- loop until it is answered: the chat would stop streaming (and parallel sub-agents' updates
-- pile up) while a question is open. So with the built-in one, the question opens in a floating
-- window whose keys answer it; a picker from a plugin (telescope, fzf-lua, dressing, snacks) is
-- asynchronous already and is used as it is.
local M = {}

local ns = vim.api.nvim_create_namespace('agent_ls_picker')

--- Whether vim.ui.select is still Neovim's own (blocking) one.
function M.select_is_builtin()
  local info = debug.getinfo(vim.ui.select, 'S')
  return info ~= nil and type(info.source) == 'string' and info.source:match('vim[/\\]ui%.lua$') ~= nil
end

local function wrapped_height(lines, width)
  local n = 0
  for _, l in ipairs(lines) do
    n = n + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
  end
  return n
end

--- Ask in a floating window: `1`..`9` or <CR> on a line picks that item; `q` or <Esc> answers
--- nil (the caller's "no"). The cursor starts on the last item, so a stray <CR> picks it
--- (for confirmations: Deny). `on_choice(item, index)` is called exactly once.
function M.float(items, opts, on_choice)
  opts = opts or {}
  local titles = {}
  for i, item in ipairs(items) do
    titles[i] = opts.format_item and opts.format_item(item) or tostring(item)
  end
  local lines = vim.split(opts.prompt or 'Choose:', '\n', { plain = true })
  lines[#lines + 1] = ''
  local first = #lines
  for i, t in ipairs(titles) do
    lines[#lines + 1] = ('%d. %s'):format(i, t)
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = ('1-%d or <CR>: choose · q/<Esc>: no'):format(#titles)

  local widest = 0
  for _, l in ipairs(lines) do
    widest = math.max(widest, vim.fn.strdisplaywidth(l))
  end
  local width = math.max(20, math.min(widest, vim.o.columns - 6, 100))
  local height = math.min(wrapped_height(lines, width), math.max(3, vim.o.lines - 6))

  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.b[buf].agent_ls_picker = true
  vim.api.nvim_buf_set_extmark(buf, ns, #lines - 1, 0, { line_hl_group = 'Comment' })

  local prev = vim.api.nvim_get_current_win()
  vim.cmd('stopinsert') -- the digits answer; they must not be typed into a buffer
  local win = vim.api.nvim_open_win(buf, true, {
    relative = 'editor',
    width = width,
    height = height,
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    style = 'minimal',
    border = 'rounded',
    title = ' agent-ls ',
    title_pos = 'center',
    zindex = 200,
  })
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].cursorline = true
  pcall(vim.api.nvim_win_set_cursor, win, { first + #titles, 0 })

  local done = false
  local function answer(index)
    if done then
      return
    end
    done = true
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_close(win, true)
    end
    if vim.api.nvim_win_is_valid(prev) then
      pcall(vim.api.nvim_set_current_win, prev)
    end
    if index then
      on_choice(items[index], index)
    else
      on_choice(nil, nil)
    end
  end
  local function map(lhs, fn)
    vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true })
  end
  for i = 1, math.min(#titles, 9) do
    map(tostring(i), function() answer(i) end)
  end
  map('<CR>', function()
    local i = vim.api.nvim_win_get_cursor(win)[1] - first
    if i >= 1 and i <= #titles then
      answer(i)
    end
  end)
  map('q', function() answer(nil) end)
  map('<Esc>', function() answer(nil) end)
  -- closing the window (:q) without a choice is no answer: the caller's "no". Leaving it is
  -- fine (to read the chat or the diff first); it stays open until answered.
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      vim.schedule(function() answer(nil) end)
    end,
  })
  return win
end

--- vim.ui.select, unless that is the built-in blocking one: then the floating picker.
function M.select(items, opts, on_choice)
  if M.select_is_builtin() then
    return M.float(items, opts, on_choice)
  end
  return vim.ui.select(items, opts, on_choice)
end

return M
