-- Shared by the Neovim test scripts: load the plugin from the repo, wait for things, and write
-- what was observed as JSON for the pytest side to check. Run as
--   nvim --headless --clean -u tests/editors/nvim/<test>.lua
-- with AGENT_LS_PLUGIN_DIR, AGENT_LS_TEST_WS, AGENT_LS_TEST_OUT and AGENT_LS_SERVER_CMD (JSON list).
local T = {}

T.ws = assert(vim.env.AGENT_LS_TEST_WS, 'AGENT_LS_TEST_WS is not set')
T.data = { log = {} }

function T.log(msg)
  T.data.log[#T.data.log + 1] = msg
end

local function write_out()
  local f = assert(io.open(vim.env.AGENT_LS_TEST_OUT, 'w'))
  f:write(vim.json.encode(T.data))
  f:close()
end

--- Put the plugin on the runtimepath and run setup() against the real server.
function T.start(opts)
  vim.opt.runtimepath:prepend(vim.env.AGENT_LS_PLUGIN_DIR)
  vim.cmd('runtime! plugin/agent_ls.lua')
  vim.o.swapfile = false
  vim.o.shortmess = vim.o.shortmess .. 'F'
  vim.cmd.cd(T.ws)
  local agent = require('agent_ls')
  agent.setup(vim.tbl_deep_extend('force', {
    cmd = vim.json.decode(vim.env.AGENT_LS_SERVER_CMD),
    root_dir = T.ws,
  }, opts or {}))
  -- keep every agent/update for the checks
  T.data.updates = {}
  local chat = require('agent_ls.chat')
  local orig = chat.on_update
  chat.on_update = function(params)
    T.data.updates[#T.data.updates + 1] = params
    return orig(params)
  end
  return agent
end

--- Wait until `cond()` is true or fail with `what`.
function T.wait(cond, ms, what)
  local ok = vim.wait(ms or 15000, function()
    local good, res = pcall(cond)
    return good and res
  end, 10)
  if not ok then
    error('timed out waiting for ' .. (what or 'a condition'), 2)
  end
end

--- Wait for the agent-ls client of the current buffer to be up.
function T.wait_client(agent)
  T.wait(function()
    local c = agent.client()
    return c and c.initialized
  end, 20000, 'the agent-ls client')
  return agent.client()
end

function T.buf_lines(bufnr)
  return vim.api.nvim_buf_get_lines(bufnr or 0, 0, -1, false)
end

function T.read(path)
  local f = io.open(path, 'r')
  if not f then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

--- Stub vim.ui.select: answer with the item titled as `answers[i]` (in order), record prompts.
function T.stub_select(answers)
  T.data.selects = {}
  local i = 0
  vim.ui.select = function(items, opts, on_choice)
    i = i + 1
    local titles = {}
    for _, item in ipairs(items) do
      titles[#titles + 1] = opts.format_item and opts.format_item(item) or tostring(item)
    end
    T.data.selects[#T.data.selects + 1] = { prompt = opts.prompt, items = titles, kind = opts.kind }
    local want = answers[i]
    for j, title in ipairs(titles) do
      if want and title:find(want, 1, true) == 1 then
        on_choice(items[j], j)
        return
      end
    end
    on_choice(nil, nil)
  end
end

--- Run `body` (a function), write the data, stop the servers and quit with the right status.
function T.run(body)
  local ok, err = xpcall(body, debug.traceback)
  if not ok then
    T.data.error = tostring(err)
  end
  T.data.messages = vim.api.nvim_exec2('messages', { output = true }).output
  write_out()
  local clients = vim.lsp.get_clients()
  for _, c in ipairs(clients) do
    c:stop()
  end
  vim.wait(3000, function()
    return #vim.lsp.get_clients() == 0
  end, 20)
  vim.cmd(ok and 'qall!' or 'cquit! 1')
end

--- For screenshots in the real TUI (tmux): redraw, tell the test `name` is ready to capture
--- (AGENT_LS_SHOT_DIR/<name>.ready) and wait until it has (<name>.go).
function T.gate(name)
  vim.cmd('redraw!')
  local dir = vim.env.AGENT_LS_SHOT_DIR
  local f = assert(io.open(dir .. '/' .. name .. '.ready', 'w'))
  f:close()
  T.wait(function()
    return vim.uv.fs_stat(dir .. '/' .. name .. '.go') ~= nil
  end, 60000, 'the capture of ' .. name)
end

--- `T.run(body)` once the TUI is up (VimEnter), with true colours and a status line.
function T.run_in_tui(body)
  vim.api.nvim_create_autocmd('VimEnter', {
    callback = function()
      vim.schedule(function()
        T.run(function()
          vim.o.termguicolors = true
          vim.o.laststatus = 2
          body()
        end)
      end)
    end,
  })
end

return T
