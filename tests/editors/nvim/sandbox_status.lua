-- The statusline and :AgentStatus say whether shell commands run in the sandbox.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  local agent = T.start(vim.json.decode(vim.env.AGENT_LS_TEST_SETUP))
  vim.cmd.edit(T.ws .. '/a.txt')
  T.wait_client(agent)
  T.wait(function() return agent.state.sandbox ~= nil end, 20000, 'the sandbox state')
  T.data.statusline = agent.statusline()
  local shown = nil
  local notify = vim.notify
  vim.notify = function(msg, level)
    shown = shown or msg
    return notify(msg, level)
  end
  vim.cmd('AgentStatus')
  T.wait(function() return shown ~= nil end, 10000, ':AgentStatus to answer')
  T.data.status = shown
end)
