-- A sub-agent's tool calls are shown indented under its task in the chat.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  local agent = T.start()
  local chat = require('agent_ls.chat')
  vim.cmd.edit(T.ws .. '/a.txt')
  T.wait_client(agent)
  vim.cmd('AgentAsk delegate the reading')
  T.wait(function() return agent.state.last_result ~= nil end, 30000, 'the run to finish')
  T.data.result = agent.state.last_result
  T.data.chat = chat.text()
end)
