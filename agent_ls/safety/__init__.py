"""Safety: the tree-sitter-bash shell command classifier and the permission rules built on it."""
