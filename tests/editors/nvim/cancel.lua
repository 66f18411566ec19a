-- :AgentCancel stops a slow run: the ask returns stopReason "cancelled" at once.
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  local agent = T.start()
  local chat = require('agent_ls.chat')
  vim.cmd.edit(T.ws .. '/a.txt')
  T.wait_client(agent)

  vim.cmd('AgentAsk tell me a long story')
  local function chunks()
    local n = 0
    for _, u in ipairs(T.data.updates) do
      if u.update.sessionUpdate == 'agent_message_chunk' then
        n = n + 1
      end
    end
    return n
  end
  T.wait(function() return chunks() >= 2 end, 20000, 'the answer to start streaming')
  T.data.chunks_at_cancel = chunks()
  local t0 = vim.uv.hrtime()
  vim.cmd('AgentCancel')
  T.wait(function() return agent.state.last_result ~= nil end, 10000, 'the cancelled result')
  T.data.seconds_to_stop = (vim.uv.hrtime() - t0) / 1e9
  T.data.result = agent.state.last_result
  local done = false
  agent.cancel(nil, function(_, r)
    T.data.second_cancel = r
    done = true
  end)
  T.wait(function() return done end, 5000, 'a second cancel')
  T.data.chat = chat.text()
  T.data.running = agent.state.running
end)
