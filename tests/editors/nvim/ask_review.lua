-- Ask -> streamed chat -> inline review: accept hunk 1, reject hunk 2 -> a confirmation
-- answered through vim.ui.select -> agent/saveDocuments -> agent/getDiagnostics.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  -- sandbox off: the confirmation is part of the test (in the sandbox `touch` would not ask)
  local agent = T.start({ settings = { sandbox = 'off' } })
  local review = require('agent_ls.review')
  local chat = require('agent_ls.chat')
  T.stub_select({ 'Allow' })
  local on_done = review.on_done
  review.on_done = function(r, result)
    T.data.review_result = result
    return on_done(r, result)
  end

  vim.cmd.edit(T.ws .. '/names.py')
  local buf = vim.api.nvim_get_current_buf()
  local ns = vim.api.nvim_create_namespace('agent_ls_test_linter')
  vim.diagnostic.set(ns, buf, {
    { lnum = 8, col = 0, end_lnum = 8, end_col = 6, message = 'test-linter: result is unused',
      severity = vim.diagnostic.severity.WARN, source = 'test-linter' },
  })
  T.wait_client(agent)

  -- what the plugin sends: capture the agent.ask argument
  local run = agent.run
  agent.run = function(name, arg, ...)
    T.data.ask_arg = arg
    T.data.ask_name = name
    return run(name, arg, ...)
  end
  -- a linewise Visual selection of lines 1-2, then :'<,'>AgentAsk
  vim.cmd('normal! ggVj\27')
  vim.cmd("'<,'>AgentAsk rename foo to bar")
  T.wait(function() return review.current() ~= nil end, 20000, 'the review to open')
  local r = review.current()
  T.data.hunks = #r.hunks
  T.data.review_list = vim.api.nvim_buf_get_lines(r.buf, 0, -1, false)
  local marks = vim.api.nvim_buf_get_extmarks(buf, vim.api.nvim_create_namespace('agent_ls_review'),
    0, -1, { details = true })
  T.data.inline_virt_lines = 0
  T.data.inline_labels = {}
  for _, m in ipairs(marks) do
    for _, vt in ipairs(m[4].virt_text or {}) do
      T.data.inline_labels[#T.data.inline_labels + 1] = vt[1]
    end
    for _, vl in ipairs(m[4].virt_lines or {}) do
      T.data.inline_virt_lines = T.data.inline_virt_lines + 1
      T.data.first_virt_line = T.data.first_virt_line or vl[1][1]
    end
  end
  T.data.buffer_during_review = T.buf_lines(buf)

  vim.cmd('AgentAccept 1')
  T.data.pending_after_accept = #review.pending()
  vim.cmd('AgentReject 2')

  T.wait(function() return agent.state.last_result ~= nil end, 20000, 'the run to finish')
  T.data.result = agent.state.last_result
  T.data.buffer = T.buf_lines(buf)
  T.data.modified = vim.bo[buf].modified
  T.data.disk = T.read(T.ws .. '/names.py')
  T.data.chat = chat.text()
  T.data.chat_visible = #chat.wins() > 0
  T.data.review_closed = review.current() == nil
  T.data.statusline = agent.statusline()
end)
