"""Setting contextd up in coding agents: where each agent reads its MCP servers and its
instructions (:mod:`.catalog`), how an entry is added to or taken out of each file format
(:mod:`.json_files`, :mod:`.toml_files`, :mod:`.instructions`), and the plan of file changes
that ``contextd install`` / ``uninstall`` print, apply and undo (:mod:`.plan`)."""
