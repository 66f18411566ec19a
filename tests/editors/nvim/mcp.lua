-- :AgentMcp lists the MCP servers: a working one with its tools, a failed one with its error.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  local servers = vim.json.decode(vim.env.AGENT_LS_TEST_MCP)
  local agent = T.start({ settings = { mcpServers = servers } })
  vim.cmd.edit(T.ws .. '/a.txt')
  T.wait_client(agent)
  local settled = nil
  T.wait(function()
    local done = false
    agent.exec('agent.mcp', nil, function(_, r)
      settled = r
      done = true
    end)
    vim.wait(5000, function() return done end, 10)
    for _, s in ipairs((settled or {}).servers or {}) do
      if s.state == 'starting' or s.state == 'approval' then
        return false
      end
    end
    return settled ~= nil and #(settled.servers or {}) == 2
  end, 60000, 'the MCP servers to settle')
  local shown = {}
  local notify = vim.notify
  vim.notify = function(msg, level)
    shown[#shown + 1] = { msg = msg, level = level }
    return notify(msg, level)
  end
  vim.cmd('AgentMcp')
  T.wait(function() return #shown > 0 end, 10000, ':AgentMcp to answer')
  T.data.shown = shown[1].msg
  T.data.level = shown[1].level
end)
