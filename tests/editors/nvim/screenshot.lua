-- The ask/review flow in Neovim's real TUI (run inside tmux by test_screenshots.py): pause at
-- the review and at the end so the test can capture the screen.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run_in_tui(function()
  local agent = T.start({ chat = { width = 66 } })
  local review = require('agent_ls.review')
  vim.cmd.edit('names.py')
  T.wait_client(agent)
  vim.cmd('AgentAsk rename foo to bar')
  T.wait(function() return review.current() ~= nil end, 20000, 'the review')
  vim.wait(300)
  T.gate('review')
  vim.cmd('AgentAccept 1')
  vim.cmd('AgentReject 2')
  T.wait(function() return agent.state.last_result ~= nil end, 20000, 'the result')
  T.data.result = agent.state.last_result
  vim.wait(200)
  T.gate('done')
end)
