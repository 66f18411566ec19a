-- Saving during a review does not spoil the accept; a review the server stopped waiting for
-- is closed, and nothing is applied after that.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  local agent = T.start({ settings = { editConfirmTimeout = 3 } })
  local review = require('agent_ls.review')
  vim.cmd.edit(T.ws .. '/names.py')
  local buf = vim.api.nvim_get_current_buf()
  T.wait_client(agent)

  -- 1. unsaved work, then :w while the review is open (b:changedtick moves, the text does
  -- not), then accept: the edit lands and is reported applied
  vim.api.nvim_buf_set_lines(buf, -1, -1, false, { '# unsaved note' })
  vim.cmd('AgentAsk rename foo to bar')
  T.wait(function() return review.current() ~= nil end, 20000, 'the first review')
  local tick = vim.api.nvim_buf_get_changedtick(buf)
  vim.api.nvim_buf_call(buf, function() vim.cmd('write') end)
  T.data.tick_changed = vim.api.nvim_buf_get_changedtick(buf) ~= tick
  vim.cmd('AgentAccept all')
  T.wait(function() return agent.state.last_result ~= nil end, 20000, 'the first run')
  T.data.first_result = agent.state.last_result
  T.data.first_buffer = T.buf_lines(buf)

  -- 2. a review nobody answers: the server stops waiting (editConfirmTimeout), the review closes
  agent.state.last_result = nil
  vim.cmd('AgentAsk and now baz')
  T.wait(function() return review.current() ~= nil end, 20000, 'the second review')
  T.wait(function() return review.current() == nil end, 20000, 'the review to be withdrawn')
  T.data.closed_by_server = true
  T.wait(function() return agent.state.last_result ~= nil end, 20000, 'the second run')
  T.data.second_result = agent.state.last_result
  T.data.second_buffer = T.buf_lines(buf)
end)
