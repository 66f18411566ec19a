"""The ground floor: the types every layer shares. Imports nothing else of agent_ls."""
