-- :checkhealth agent_ls
local M = {}

function M.check()
  local health = vim.health
  health.start('agent-ls')
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. tostring(vim.version()))
  else
    health.error('Neovim 0.10 or newer is needed')
  end
  local agent = require('agent_ls')
  if not agent.config then
    health.warn("setup() has not run: require('agent_ls').setup({})")
    return
  end
  local cmd = agent.server_cmd(agent.root(vim.api.nvim_get_current_buf()))
  if not cmd then
    health.error('cannot find the server', { 'pip install . (in a clone of agent-ls)', "or setup({ cmd = { 'agent-ls', 'serve' } })" })
  elseif vim.fn.executable(cmd[1]) == 1 then
    health.ok('server: ' .. table.concat(cmd, ' '))
  else
    health.error('not executable: ' .. cmd[1])
  end
  local clients = vim.lsp.get_clients({ name = 'agent_ls' })
  if #clients == 0 then
    health.info('no agent-ls client is running yet (it starts with the first file buffer)')
  end
  for _, c in ipairs(clients) do
    health.ok(('client %d: root %s, position encoding %s'):format(c.id, c.root_dir or '?', c.offset_encoding))
  end
  local model = agent.config.model or (agent.config.settings or {}).model or vim.env.AGENT_LS_MODEL
  health.info('model: ' .. (model or "the server's default"))
  if not (model and model:match('^script:')) and not vim.env.ANTHROPIC_API_KEY and not vim.env.OPENAI_API_KEY then
    health.warn('neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set in the environment')
  end
end

return M
