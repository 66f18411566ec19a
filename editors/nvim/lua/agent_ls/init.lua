-- agent-ls for Neovim: a coding agent served as a language server.
--
--   require('agent_ls').setup({ cmd = { 'agent-ls', 'serve' }, model = ..., mode = ... })
--
-- See :help agent-ls.
local util = require('agent_ls.util')
local chat = require('agent_ls.chat')
local review = require('agent_ls.review')
local picker = require('agent_ls.picker')

local M = {}

M.modes = { 'default', 'acceptEdits', 'plan', 'bypassPermissions' }

local defaults = {
  cmd = nil, -- list (or string) starting the server; nil: `agent-ls serve` from PATH or .venv
  model = nil, -- e.g. 'anthropic:claude-sonnet-5-5', 'openai:gpt-4.1', 'script:/path/demo.json'
  mode = nil, -- 'default' | 'acceptEdits' | 'plan' | 'bypassPermissions'
  settings = {}, -- other server settings: permissions, followAgent, maxTurns, maxCostUsd, ...
  env = nil, -- extra environment for the server process (API keys come from your environment)
  root_dir = nil, -- string, or function(bufnr) -> string; nil: found from root_markers, else cwd
  root_markers = { '.git', '.hg', 'pyproject.toml', 'package.json', 'Cargo.toml', 'go.mod' },
  autostart = true, -- attach to every file buffer
  filetypes = nil, -- nil: every filetype; else a list
  chat = {}, -- position ('right'|'left'|'bottom'), width, height, auto_open, follow
  review = {}, -- enabled, focus, height, keymaps (see agent_ls.review)
}

--- The options in force (after setup).
M.config = nil

--- What the plugin knows of the server's state.
M.state = {
  running = 0,
  last_result = nil, -- the last ask/fix result (a table) or nil
  last_error = nil,
  results = {}, -- every ask/fix result, oldest first
  session = nil,
  tokens = 0, -- input + output tokens of the runs made from this Neovim
  sandbox = nil, -- agent.status' sandbox {mode, active, backend, reason?} once the server answered
}

local augroup = vim.api.nvim_create_augroup('agent_ls', { clear = true })

-- -- handlers for what the server asks ---------------------------------------------------

local function to_lsp_diagnostic(d, bufnr, enc)
  if d.user_data and d.user_data.lsp then
    return d.user_data.lsp
  end
  local function line(n)
    return vim.api.nvim_buf_get_lines(bufnr, n, n + 1, false)[1] or ''
  end
  local end_lnum = d.end_lnum or d.lnum
  local end_col = d.end_col or d.col
  local sev = d.severity or vim.diagnostic.severity.ERROR
  return {
    range = {
      start = { line = d.lnum, character = util.from_byte(line(d.lnum), d.col or 0, enc) },
      ['end'] = { line = end_lnum, character = util.from_byte(line(end_lnum), end_col, enc) },
    },
    severity = sev, -- vim.diagnostic.severity uses LSP's numbers (1 = error ... 4 = hint)
    message = d.message,
    source = d.source,
    code = d.code,
  }
end
M.to_lsp_diagnostic = to_lsp_diagnostic

local function offset_encoding(client)
  return client and client.offset_encoding or 'utf-16'
end

--- `agent/getDiagnostics {uri?}` -> `{items: [{uri, diagnostics}]}` from vim.diagnostic.
local function get_diagnostics(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local enc = offset_encoding(client)
  local items = {}
  local function add(bufnr)
    local diags = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      diags[#diags + 1] = to_lsp_diagnostic(d, bufnr, enc)
    end
    items[#items + 1] = { uri = vim.uri_from_bufnr(bufnr), diagnostics = diags }
  end
  local uri = type(params) == 'table' and params.uri or nil
  if uri and uri ~= vim.NIL then
    local bufnr = util.loaded_buf(uri)
    if bufnr then
      add(bufnr)
    else
      items[1] = { uri = uri, diagnostics = {} }
    end
  else
    local seen = {}
    for _, d in ipairs(vim.diagnostic.get(nil)) do
      if not seen[d.bufnr] and vim.api.nvim_buf_is_valid(d.bufnr) then
        seen[d.bufnr] = true
        add(d.bufnr)
      end
    end
  end
  return { items = items }
end

--- `agent/saveDocuments {uris}` -> `{saved}`: write the buffers the agent edited.
local function save_documents(_, params)
  local saved = {}
  for _, uri in ipairs(type(params) == 'table' and params.uris or {}) do
    local bufnr = util.loaded_buf(uri)
    if not bufnr then
      saved[#saved + 1] = uri -- not open: the disk is what there is
    else
      if vim.bo[bufnr].modified then
        pcall(vim.api.nvim_buf_call, bufnr, function()
          vim.cmd('silent keepalt write')
        end)
      end
      if not vim.bo[bufnr].modified then
        saved[#saved + 1] = uri
      end
    end
  end
  return { saved = saved }
end

--- `window/showMessageRequest` through vim.ui.select (Allow / Allow for this session / Deny).
local function show_message_request(_, params)
  local actions = params.actions or {}
  if #actions == 0 then
    vim.notify(params.message)
    return vim.NIL
  end
  local co, is_main = coroutine.running()
  local opts = {
    kind = 'agent_ls_confirm',
    prompt = 'agent-ls: ' .. params.message,
    format_item = function(action)
      return action.title
    end,
  }
  if not co or is_main then
    local answer = vim.NIL
    vim.ui.select(actions, opts, function(choice)
      answer = choice or vim.NIL
    end)
    return answer
  end
  -- never the blocking built-in select here: the chat streams on while the question is open
  picker.select(actions, opts, function(choice)
    vim.schedule(function()
      coroutine.resume(co, choice or vim.NIL)
    end)
  end)
  return coroutine.yield()
end

local function on_update(_, params)
  chat.on_update(params)
  if type(params) == 'table' and params.sessionId then
    M.state.session = params.sessionId
  end
end

function M.handlers()
  return {
    ['agent/update'] = on_update,
    ['agent/getDiagnostics'] = get_diagnostics,
    ['agent/saveDocuments'] = save_documents,
    ['window/showMessageRequest'] = show_message_request,
    ['workspace/applyEdit'] = review.handler,
    -- The server withdraws a request it stopped waiting for (editConfirmTimeout, a cancelled
    -- run): close the open reviews so nothing is applied after the agent was told it failed.
    -- Neovim does not say which request a handler serves, so every open review is closed.
    ['$/cancelRequest'] = function()
      if review.current() then
        review.abort_all('the agent stopped waiting for this review')
        util.notify('agent-ls: the agent stopped waiting; the review was closed unapplied')
      end
    end,
  }
end

-- -- the client ------------------------------------------------------------------------------

local function settings_object()
  local s = vim.deepcopy(M.config.settings or {})
  s.model = M.config.model or s.model
  s.mode = M.config.mode or s.mode
  if vim.tbl_isempty(s) then
    return vim.empty_dict()
  end
  return s
end

--- The command that starts the server for `root`, or nil.
function M.server_cmd(root)
  local cmd = M.config and M.config.cmd
  if type(cmd) == 'string' then
    return { cmd, 'serve' }
  elseif type(cmd) == 'table' then
    return cmd
  end
  if vim.fn.executable('agent-ls') == 1 then
    return { 'agent-ls', 'serve' }
  end
  for _, dir in ipairs({ root, vim.fn.getcwd() }) do
    if dir then
      local exe = dir .. '/.venv/bin/agent-ls'
      if vim.fn.executable(exe) == 1 then
        return { exe, 'serve' }
      end
    end
  end
  return nil
end

function M.root(bufnr)
  local r = M.config.root_dir
  if type(r) == 'function' then
    r = r(bufnr)
  end
  if r then
    return vim.fs.normalize(r)
  end
  if vim.fs.root and bufnr and util.is_file_buffer(bufnr) then
    local found = vim.fs.root(bufnr, M.config.root_markers)
    if found then
      return found
    end
  end
  return vim.fn.getcwd()
end

function M.client_config(root)
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.workspace = caps.workspace or {}
  caps.workspace.workspaceEdit = caps.workspace.workspaceEdit or {}
  local we = caps.workspace.workspaceEdit
  we.documentChanges = true
  we.resourceOperations = we.resourceOperations or { 'create', 'rename', 'delete' }
  if review.config.enabled then
    -- what lets the server send one annotated edit per hunk for review
    we.changeAnnotationSupport = { groupsOnLabel = false }
  end
  caps.window = caps.window or {}
  caps.window.workDoneProgress = true
  local settings = settings_object()
  return {
    name = 'agent_ls',
    cmd = M.server_cmd(root),
    cmd_env = M.config.env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = settings,
    settings = { agent = settings },
    capabilities = caps,
    handlers = M.handlers(),
    on_init = function(client)
      -- the sandbox indicator of the statusline: asked once the server is up
      vim.schedule(function()
        util.request(client, 'workspace/executeCommand',
          { command = 'agent.status', arguments = { vim.empty_dict() } }, function(err, st)
            if not err and type(st) == 'table' and type(st.sandbox) == 'table' then
              M.state.sandbox = st.sandbox
              vim.cmd('redrawstatus')
            end
          end)
      end)
    end,
    commands = {
      -- the server's "Fix with agent" code action runs through the plugin (chat, review)
      ['agent.fix'] = function(command, ctx)
        local arg = command.arguments and command.arguments[1] or {}
        local first = arg.diagnostics and arg.diagnostics[1]
        M.run('agent.fix', arg, 'Fix with agent' .. (first and (': ' .. first.message) or ''),
          nil, ctx and ctx.bufnr)
      end,
    },
  }
end

local warned = false

--- Start (or reuse) the server for `bufnr` and attach the buffer. Returns the client id.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not M.config or not util.is_file_buffer(bufnr) then
    return nil
  end
  local fts = M.config.filetypes
  if fts and not vim.tbl_contains(fts, vim.bo[bufnr].filetype) then
    return nil
  end
  local cfg = M.client_config(M.root(bufnr))
  if not cfg.cmd then
    if not warned then
      warned = true
      util.notify('cannot find `agent-ls`: install it from a clone (pip install . in it) or set `cmd` in setup()',
        vim.log.levels.ERROR)
    end
    return nil
  end
  return vim.lsp.start(cfg, { bufnr = bufnr })
end

--- The agent-ls client of `bufnr` (or any agent-ls client).
function M.client(bufnr)
  local clients = vim.lsp.get_clients({ name = 'agent_ls', bufnr = bufnr or vim.api.nvim_get_current_buf() })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = 'agent_ls' })
  end
  return clients[1]
end

--- Call `fn(client)` once a client is running and initialized.
local function with_client(bufnr, fn)
  local client = M.client(bufnr)
  if not client then
    local id = M.attach(bufnr)
    if not id and M.config then
      local cfg = M.client_config(M.root(nil))
      if cfg.cmd and util.has_011 then
        id = vim.lsp.start(cfg, { attach = false })
      elseif cfg.cmd then
        id = vim.lsp.start_client(cfg)
      end
    end
    client = id and vim.lsp.get_client_by_id(id)
  end
  if not client then
    util.notify('the agent-ls server is not running (see :checkhealth agent_ls)', vim.log.levels.ERROR)
    return
  end
  local waited = 0
  local function go()
    if client.initialized then
      fn(client)
    elseif (util.has_011 and client:is_stopped()) or (not util.has_011 and client.is_stopped()) then
      util.notify('the agent-ls server stopped', vim.log.levels.ERROR)
    elseif waited > 20000 then
      util.notify('the agent-ls server did not start', vim.log.levels.ERROR)
    else
      waited = waited + 20
      vim.defer_fn(go, 20)
    end
  end
  go()
end

--- Run a server command `name` with one JSON object; `cb(err, result)`.
function M.exec(name, arg, cb, bufnr)
  if not M.config then
    M.setup({})
  end
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if arg == nil or (type(arg) == 'table' and vim.tbl_isempty(arg)) then
    arg = vim.empty_dict()
  end
  with_client(bufnr, function(client)
    util.request(client, 'workspace/executeCommand', { command = name, arguments = { arg } },
      function(err, result)
        if cb then
          cb(err, result)
        elseif err then
          util.notify(name .. ': ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
        end
      end, util.is_file_buffer(bufnr) and bufnr or nil)
  end)
end

--- Run an ask or a fix: the prompt goes to the chat, the stream follows, the result ends it.
function M.run(name, arg, shown, context, bufnr, on_done)
  chat.user_prompt(shown, context)
  if chat.config.auto_open then
    chat.open(false)
  end
  M.state.running = M.state.running + 1
  chat.state.running = M.state.running
  vim.cmd('redrawstatus!')
  M.exec(name, arg, function(err, result)
    M.state.running = math.max(0, M.state.running - 1)
    chat.state.running = M.state.running
    if M.state.running == 0 then
      review.abort_all('the run ended before the edit was reviewed')
    end
    M.state.last_result, M.state.last_error = result, err
    if type(result) == 'table' then
      M.state.results[#M.state.results + 1] = result
      M.state.session = result.sessionId or M.state.session
      local usage = result.usage or {}
      M.state.tokens = M.state.tokens + (usage.inputTokens or 0) + (usage.outputTokens or 0)
      if result.stopReason == 'error' then
        util.notify('run failed: ' .. tostring(result.error), vim.log.levels.ERROR)
      elseif result.stopReason == 'cancelled' then
        util.notify('run cancelled')
      end
    elseif err then
      util.notify(name .. ': ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    chat.on_result(result, err)
    vim.cmd('redrawstatus!')
    pcall(vim.api.nvim_exec_autocmds, 'User', {
      pattern = 'AgentLsDone',
      modeline = false,
      data = { command = name, result = result, error = err },
    })
    if on_done then
      on_done(err, result)
    end
  end, bufnr)
end

-- -- commands ----------------------------------------------------------------------------

--- The LSP range of a command's line range (visual charwise selections keep their columns).
local function selection_range(bufnr, line1, line2, enc)
  local lines = vim.api.nvim_buf_get_lines(bufnr, line1 - 1, line2, false)
  local first, last = lines[1] or '', lines[#lines] or ''
  local s_col, e_col = 0, #last
  local vs, ve = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  local vmode = vim.fn.visualmode()
  if vmode == 'v' and vs[2] == line1 and ve[2] == line2 then
    s_col = math.min(vs[3] - 1, #first)
    local e = math.min(ve[3], #last) -- 1-based byte of the last selected character
    if e > 0 then
      local ok, extra = pcall(vim.str_utf_end, last, e)
      e_col = e + (ok and extra or 0)
    else
      e_col = 0
    end
  end
  return {
    start = { line = line1 - 1, character = util.from_byte(first, s_col, enc) },
    ['end'] = { line = line2 - 1, character = util.from_byte(last, e_col, enc) },
  }
end

--- Ask the agent. opts: {line1, line2, range (count), bufnr}; no prompt: ask for one.
function M.ask(prompt, opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  if not prompt or vim.trim(prompt) == '' then
    vim.ui.input({ prompt = 'Ask agent: ' }, function(input)
      if input and vim.trim(input) ~= '' then
        M.ask(input, opts)
      end
    end)
    return
  end
  local arg = { prompt = prompt }
  local context
  if util.is_file_buffer(bufnr) then
    arg.uri = vim.uri_from_bufnr(bufnr)
    context = util.short(vim.api.nvim_buf_get_name(bufnr))
    if opts.range and opts.range > 0 then
      local client = M.client(bufnr)
      arg.range = selection_range(bufnr, opts.line1, opts.line2, offset_encoding(client))
      context = ('%s, lines %d-%d'):format(context, opts.line1, opts.line2)
    end
  end
  M.run('agent.ask', arg, prompt, context, bufnr, opts.on_done)
end

--- Fix the diagnostics on the cursor line (or in the range) with the agent.
function M.fix(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  if not util.is_file_buffer(bufnr) then
    util.notify('AgentFix works in a file buffer', vim.log.levels.WARN)
    return
  end
  local line1 = opts.line1 or vim.api.nvim_win_get_cursor(0)[1]
  local line2 = opts.line2 or line1
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.lnum + 1 >= line1 and d.lnum + 1 <= line2 then
      found[#found + 1] = d
    end
  end
  if #found == 0 then
    util.notify(('no diagnostics on line%s %d%s'):format(line1 == line2 and '' or 's', line1,
      line1 == line2 and '' or ('-' .. line2)), vim.log.levels.WARN)
    return
  end
  local client = M.client(bufnr)
  local enc = offset_encoding(client)
  local diags = {}
  for _, d in ipairs(found) do
    diags[#diags + 1] = to_lsp_diagnostic(d, bufnr, enc)
  end
  local last = vim.api.nvim_buf_get_lines(bufnr, line2 - 1, line2, false)[1] or ''
  local arg = {
    uri = vim.uri_from_bufnr(bufnr),
    range = {
      start = { line = line1 - 1, character = 0 },
      ['end'] = { line = line2 - 1, character = util.from_byte(last, #last, enc) },
    },
    diagnostics = diags,
  }
  local title = #diags == 1 and ('Fix with agent: ' .. diags[1].message)
    or ('Fix %d problems with agent'):format(#diags)
  M.run('agent.fix', arg, title, util.short(vim.api.nvim_buf_get_name(bufnr)), bufnr, opts.on_done)
end

--- `vim.lsp.buf.code_action()` with the diagnostics of the cursor line from every source, so
--- the server's "Fix with agent" action shows for diagnostics of other language servers too
--- (Neovim sends a server only its own diagnostics). `opts` go to vim.lsp.buf.code_action.
function M.code_action(opts)
  opts = vim.deepcopy(opts or {})
  local bufnr = vim.api.nvim_get_current_buf()
  local lnum = vim.api.nvim_win_get_cursor(0)[1] - 1
  local enc = offset_encoding(M.client(bufnr))
  local diags = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr, { lnum = lnum })) do
    diags[#diags + 1] = to_lsp_diagnostic(d, bufnr, enc)
  end
  opts.context = vim.tbl_extend('force', { diagnostics = diags }, opts.context or {})
  vim.lsp.buf.code_action(opts)
end

--- Stop the running agent (every session, or `session_id`).
function M.cancel(session_id, cb)
  M.exec('agent.cancel', session_id and { sessionId = session_id } or nil, function(err, result)
    review.abort_all('the run was cancelled')
    if err then
      util.notify('cancel: ' .. (err.message or ''), vim.log.levels.ERROR)
    elseif result and not result.cancelled then
      util.notify('nothing is running')
    end
    if cb then
      cb(err, result)
    end
  end)
end

function M.new_session(cb)
  M.exec('agent.newSession', nil, function(err, result)
    if result then
      M.state.session = result.sessionId
      chat.note('new session ' .. tostring(result.sessionId))
    end
    if cb then
      cb(err, result)
    end
  end)
end

--- Pick a session to resume (or start a new one).
function M.sessions()
  M.exec('agent.sessions', nil, function(err, result)
    if err or type(result) ~= 'table' then
      util.notify('sessions: ' .. (err and err.message or 'no answer'), vim.log.levels.ERROR)
      return
    end
    local items = { { new = true } }
    vim.list_extend(items, result.sessions or {})
    vim.ui.select(items, {
      prompt = 'Agent sessions',
      kind = 'agent_ls_sessions',
      format_item = function(s)
        if s.new then
          return '+ New session'
        end
        local title = (s.title and s.title ~= vim.NIL and s.title ~= '') and s.title or s.sessionId
        return ('%s%s  (%d turns%s)'):format(s.current and '* ' or '  ', title, s.turns or 0,
          (s.costUsd and s.costUsd ~= vim.NIL and s.costUsd > 0) and (', $%.4f'):format(s.costUsd) or '')
      end,
    }, function(choice)
      if not choice then
        return
      end
      if choice.new then
        M.new_session()
        return
      end
      M.exec('agent.resume', { sessionId = choice.sessionId }, function(e, r)
        if r then
          M.state.session = r.sessionId
          chat.note('resumed session ' .. tostring(r.title or r.sessionId))
        elseif e then
          util.notify('resume: ' .. (e.message or ''), vim.log.levels.ERROR)
        end
      end)
    end)
  end)
end

--- Set the permission mode (pick one when `mode` is nil).
function M.set_mode(mode, cb)
  local function apply(m)
    M.exec('agent.setMode', { mode = m }, function(err, result)
      if err then
        util.notify('mode: ' .. (err.message or ''), vim.log.levels.ERROR)
      elseif result then
        chat.state.mode = result.mode
        util.notify('mode: ' .. result.mode)
        vim.cmd('redrawstatus!')
      end
      if cb then
        cb(err, result)
      end
    end)
  end
  if mode and mode ~= '' then
    apply(mode)
    return
  end
  vim.ui.select(M.modes, { prompt = 'Agent permission mode', kind = 'agent_ls_mode' }, function(choice)
    if choice then
      apply(choice)
    end
  end)
end

--- Show the server's status: model, mode, session, tokens and cost.
function M.status(cb)
  M.exec('agent.status', nil, function(err, s)
    if err or type(s) ~= 'table' then
      util.notify('status: ' .. (err and err.message or 'no answer'), vim.log.levels.ERROR)
      return
    end
    chat.state.mode = s.mode
    M.state.sandbox = type(s.sandbox) == 'table' and s.sandbox or M.state.sandbox
    local usage = type(s.usage) == 'table' and s.usage or {}
    local lines = {
      ('agent-ls %s · model %s · mode %s'):format(s.version or '?', s.model or '?', s.mode or '?'),
      ('session %s · %s'):format(s.sessionId ~= vim.NIL and s.sessionId or '(none yet)',
        (s.running and #s.running > 0) and 'running' or 'idle'),
      ('tokens: %d in, %d out, %d cache read, %d cache write · $%.4f'):format(usage.inputTokens or 0,
        usage.outputTokens or 0, usage.cachedReadTokens or 0, usage.cachedWriteTokens or 0, s.costUsd or 0),
    }
    if s.grants and #s.grants > 0 then
      lines[#lines + 1] = 'allowed for this session: ' .. table.concat(s.grants, ', ')
    end
    local sb = M.state.sandbox
    if sb then
      lines[#lines + 1] = sb.active and ('shell sandbox: %s (%s)'):format(sb.backend or '?', sb.mode or '?')
        or ('shell sandbox: off (%s)%s'):format(sb.mode or '?',
          type(sb.reason) == 'string' and (': ' .. sb.reason) or '')
    end
    util.notify(table.concat(lines, '\n'))
    if cb then
      cb(err, s)
    end
  end)
end

--- Show the MCP servers: source, state, tools, and a failed server's error.
function M.mcp(cb)
  M.exec('agent.mcp', nil, function(err, r)
    if err or type(r) ~= 'table' then
      util.notify('mcp: ' .. (err and err.message or 'no answer'), vim.log.levels.ERROR)
      return
    end
    local servers = type(r.servers) == 'table' and r.servers or {}
    local lines = {}
    if #servers == 0 then
      lines[1] = 'No MCP servers configured.'
    end
    for _, s in ipairs(servers) do
      local tools = type(s.tools) == 'table' and s.tools or {}
      lines[#lines + 1] = ('%s [%s] %s%s'):format(s.name or '?', s.source or '?', s.state or '?',
        #tools > 0 and (' · %d tools'):format(#tools) or '')
      if type(s.error) == 'string' then
        lines[#lines + 1] = '  error: ' .. s.error
      end
      for _, t in ipairs(tools) do
        lines[#lines + 1] = '  ' .. t
      end
    end
    for _, p in ipairs(type(r.problems) == 'table' and r.problems or {}) do
      lines[#lines + 1] = 'problem: ' .. p
    end
    local failed = false
    for _, s in ipairs(servers) do
      failed = failed or s.state == 'failed'
    end
    util.notify(table.concat(lines, '\n'), failed and vim.log.levels.WARN or nil)
    if cb then
      cb(err, r)
    end
  end)
end

function M.clear_grants()
  M.exec('agent.clearGrants', nil, function(err, r)
    if r then
      util.notify(('cleared %d session grant(s)'):format(r.cleared or 0))
    end
  end)
end

--- Append a line to the project's memory (it shows from the next ask).
function M.remember(text)
  text = vim.trim(text or '')
  if text == '' then
    text = vim.trim(vim.fn.input('Remember: '))
  end
  if text == '' then
    return
  end
  M.exec('agent.remember', { text = text }, function(err, r)
    if err then
      util.notify('remember: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif r then
      util.notify(('remembered in %s: %s'):format(r.path or '?', r.line or text))
    end
  end)
end

--- Revert what the session's last run applied (the editor previews it like an edit).
function M.undo()
  M.exec('agent.undo', nil, function(err, r)
    if err then
      util.notify('undo: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    local lines = {}
    for _, path in ipairs(r.reverted or {}) do
      lines[#lines + 1] = 'reverted ' .. path
    end
    for _, skip in ipairs(r.skipped or {}) do
      lines[#lines + 1] = ('left %s: %s'):format(skip.path or '?', skip.reason or '')
    end
    util.notify(#lines > 0 and table.concat(lines, '\n') or 'nothing to undo')
  end)
end

--- A short status for a statusline or winbar: mode, running state, tokens, cost.
function M.statusline()
  local s = chat.state
  local parts = { 'agent' }
  if s.mode then
    parts[#parts + 1] = s.mode
  end
  if M.state.sandbox then
    parts[#parts + 1] = M.state.sandbox.active and 'sandboxed' or 'unsandboxed'
  end
  if (M.state.running or 0) > 0 then
    parts[#parts + 1] = '● ' .. (s.progress or 'running')
  end
  if M.state.tokens > 0 then
    parts[#parts + 1] = ('%d tok'):format(M.state.tokens)
  end
  local cost = s.usage and type(s.usage.cost) == 'table' and s.usage.cost.amount
  if cost and cost > 0 then
    parts[#parts + 1] = ('$%.4f'):format(cost)
  end
  return (table.concat(parts, ' · '):gsub('%%', '%%%%'))
end

-- -- setup -----------------------------------------------------------------------------------

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  if opts and opts.cmd then
    M.config.cmd = opts.cmd -- a list is taken as given, not merged
  end
  chat.config = vim.tbl_deep_extend('force', chat.config, M.config.chat or {})
  review.config = vim.tbl_deep_extend('force', review.config, M.config.review or {})
  vim.api.nvim_clear_autocmds({ group = augroup })
  if M.config.autostart then
    vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufEnter', 'FileType' }, {
      group = augroup,
      callback = function(ev)
        if not vim.lsp.buf_is_attached(ev.buf, (M.client(ev.buf) or {}).id or -1) then
          M.attach(ev.buf)
        end
      end,
    })
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(buf) and util.is_file_buffer(buf) then
        M.attach(buf)
      end
    end
  end
  review.on_done = function(r, result)
    local shown = {}
    for _, doc in ipairs(r.docs) do
      shown[#shown + 1] = util.short(doc.fname)
    end
    local note = ('Review: accepted %d of %d hunk%s in %s'):format(r.applied or 0, #r.hunks,
      #r.hunks == 1 and '' or 's', table.concat(shown, ', '))
    if not result.applied and result.failureReason then
      note = note .. ' (' .. result.failureReason .. ')'
    end
    chat.note(note)
  end
  vim.api.nvim_create_autocmd('LspProgress', {
    group = augroup,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data and ev.data.client_id or -1)
      if not client or client.name ~= 'agent_ls' then
        return
      end
      local value = ev.data.params and ev.data.params.value or {}
      if value.kind == 'end' then
        chat.state.progress = nil
      else
        chat.state.progress = value.message or value.title
      end
      vim.cmd('redrawstatus!')
    end,
  })
  return M
end

return M
