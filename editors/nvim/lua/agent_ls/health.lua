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
    or 'anthropic:claude-sonnet-5-5' -- the server's default
  health.info('model: ' .. model)
  local provider, rest = model:match('^(%w+):(.+)$')
  local keys = { anthropic = 'ANTHROPIC_API_KEY', openai = 'OPENAI_API_KEY' }
  if not provider then
    health.error(('model %q is not provider:model'):format(model),
      { 'anthropic:<model>, openai:<model> or script:<path>' })
  elseif provider == 'script' then
    local path = vim.fn.expand(rest)
    if vim.fn.filereadable(path) == 1 then
      health.ok('script file: ' .. path)
    else
      health.error('the script file does not exist: ' .. path)
    end
  elseif keys[provider] then
    local base = vim.env[provider:upper() .. '_BASE_URL']
    if vim.env[keys[provider]] and vim.env[keys[provider]] ~= '' then
      health.ok(keys[provider] .. ' is set')
    elseif provider == 'openai' and base then
      health.ok('OPENAI_BASE_URL is set (a local server may need no key)')
    else
      health.error(keys[provider] .. ' is not set in the environment Neovim runs in',
        { 'export ' .. keys[provider] .. '=... before starting Neovim' })
    end
  else
    health.error('unknown model provider ' .. provider, { 'anthropic, openai or script' })
  end
end

return M
