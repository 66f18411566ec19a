from agent_ls.cli import entry

entry()
