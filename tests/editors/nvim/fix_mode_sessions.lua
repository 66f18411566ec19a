-- :AgentMode, the server's "Fix with agent" code action run through the plugin (acceptEdits:
-- no review), :AgentStatus and :AgentSessions.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  local agent = T.start()
  local chat = require('agent_ls.chat')
  local review = require('agent_ls.review')
  T.data.reviews = 0
  local show = review.show
  review.show = function(...)
    T.data.reviews = T.data.reviews + 1
    return show(...)
  end
  T.stub_select({ '+ New session' })

  vim.cmd.edit(T.ws .. '/typo.py')
  local buf = vim.api.nvim_get_current_buf()
  local ns = vim.api.nvim_create_namespace('agent_ls_test_linter')
  vim.diagnostic.set(ns, buf, {
    { lnum = 0, col = 0, end_lnum = 0, end_col = 5, message = "undefined name 'pritn'",
      severity = vim.diagnostic.severity.ERROR, source = 'test-linter' },
  })
  T.wait_client(agent)

  local done = false
  agent.set_mode('acceptEdits', function(_, r)
    T.data.mode_result = r
    done = true
  end)
  T.wait(function() return done end, 10000, 'setMode')
  T.wait(function() return chat.state.mode == 'acceptEdits' end, 5000, 'current_mode_update')
  T.data.chat_mode = chat.state.mode

  -- what the server offers on the line (the same request vim.lsp.buf.code_action makes)
  local client = agent.client(buf)
  local diag = agent.to_lsp_diagnostic(vim.diagnostic.get(buf)[1], buf, client.offset_encoding)
  local res = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = diag.range,
    context = { diagnostics = { diag } },
  }, 10000)
  T.data.actions = {}
  for _, r in pairs(res or {}) do
    for _, a in ipairs(r.result or {}) do
      T.data.actions[#T.data.actions + 1] = a.title
    end
  end

  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  agent.code_action({ apply = true })
  T.wait(function() return agent.state.last_result ~= nil end, 20000, 'the fix to finish')
  T.data.result = agent.state.last_result
  T.data.buffer = T.buf_lines(buf)
  T.data.chat = chat.text()

  done = false
  agent.status(function(_, s)
    T.data.status = s
    done = true
  end)
  T.wait(function() return done end, 10000, 'status')

  vim.cmd('AgentSessions')
  T.wait(function() return agent.state.session ~= T.data.result.sessionId end, 10000, 'a new session')
  T.data.new_session = agent.state.session
end)
