-- A sub-agent's task in Neovim's real TUI (run inside tmux by test_screenshots.py): pause once
-- the run is done so the test can capture the chat with the task's calls indented under it.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run_in_tui(function()
  local agent = T.start({ chat = { width = 80 } })
  local chat = require('agent_ls.chat')
  vim.cmd.edit('app.py')
  T.wait_client(agent)
  vim.cmd('AgentAsk where is the greeting made, and who calls it?')
  T.wait(function() return agent.state.last_result ~= nil end, 30000, 'the result')
  T.data.result = agent.state.last_result
  T.data.chat = chat.text()
  vim.wait(200)
  T.gate('task')
end)
